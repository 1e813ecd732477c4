// `optkit plan estimate`: one given configuration (mode, TP/PP/DP/EP, batch, prompt chunk) priced
// as `plan` prices it (AIConfigurator's estimate mode): TTFT, TPOT, throughput and memory, with
// each step's time split by what it goes to (GEMMs, attention, communication, MoE, memory-bound
// glue) and the source of every figure. The row is computed by the search's own functions, so it
// equals the row `plan` prints for the same configuration.
#pragma once

#include "archive/run_context.hpp"
#include "core/table.hpp"
#include "plan/plan_run.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace optkit::plan {

struct EstimateOptions {
  PlanOptions plan;                      // model, system, GPUs, workload, precision, engine, SLA, perf database
  std::string mode = "agg";              // static, agg or disagg
  perf::ParallelConfig parallel;         // the worker (static/agg) or the decode worker (disagg)
  int batch = 1;                         // sequences in flight (disagg: the decode batch)
  int ctx_tokens = 0;                    // agg: prompt tokens per mixed step (0: one whole prompt)
  perf::ParallelConfig prefill_parallel; // disagg: the prefill worker
  int prefill_batch = 1;                 // disagg: prompts prefilled together
  WorkerCounts workers;                  // disagg: the unit's workers (0, 0: rate-matched)
};

// One step the configuration runs, priced part by part (µs per step).
struct PricedStep {
  std::string name;   // "prefill", "mixed", "decode"
  std::string worker; // the worker running it: "tp2pp1"
  perf::StepShape shape;
  perf::StepParts parts;
};

struct EstimateRun {
  PlanRequest request;
  perf::SystemSpec system;
  std::string perf_db_directory; // "" when none: roofline only
  PlanRow row;
  perf::MemoryBudget memory; // per GPU of the (decode) worker
  std::vector<PricedStep> steps;
};

// Validates the configuration (InputError naming the flag), prices it, judges it against the SLA
// and archives its figures. A configuration that does not fit, or that the search would not form,
// is an InputError saying why.
EstimateRun run_estimate(const EstimateOptions& options, const archive::RunContext& context);

Table estimate_table(const EstimateRun& run);         // one line per step, one column per part
std::string estimate_summary(const EstimateRun& run); // the row's figures above the table
nlohmann::json to_json(const EstimateRun& run);

} // namespace optkit::plan
