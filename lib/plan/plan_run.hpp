// `optkit plan` as a recorded run: resolves the model, system and perf database, searches,
// archives the chosen configuration's figures, and renders the Pareto frontier for people
// (table) or programs (JSON/CSV), the launch script (--emit) and the SVG (--plot).
#pragma once

#include "archive/run_context.hpp"
#include "core/table.hpp"
#include "plan/search.hpp"
#include "plan/tail_latency.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::plan {

struct PlanOptions {
  std::string model;
  std::string system;
  int gpus = 8;
  double isl = 4000, osl = 1000, prefix = 0;
  std::optional<double> ttft_ms, tpot_ms, speed; // SLA (defaults: TTFT 2000 ms, TPOT 30 ms)
  std::optional<double> e2e_ms;                  // SLA: request latency (then TPOT follows from it)
  std::optional<std::string> engine;             // whose memory rules apply; default: the --emit engine, else vllm
  std::string weight_dtype = "bf16", activation_dtype, kv_dtype = "auto"; // auto: the engine's default
  std::optional<double> memory_fraction;
  std::string modes = "agg,disagg";
  int spec_tokens = 0;
  double spec_acceptance = 0.7, spec_draft_cost = 0.05;
  double moe_alpha = 1.01;
  std::optional<double> target_rate;
  std::string perf_db; // override profiles/perf/<system>
  std::string emit;    // vllm | sglang | trtllm
  std::string plot;    // SVG path
  std::string bench_profile;
  // Percentile SLAs (--slo, bench's syntax): the rows meeting the mean SLA served on the simulator
  // under Poisson arrivals, at --rate and at the highest rate their SLOs allow.
  std::vector<std::string> slos;
  std::optional<double> rate; // requests/s over the deployment
  int slo_requests = 2000;    // simulated requests per evaluation
};

struct PlanRun {
  PlanRequest request;
  perf::SystemSpec system;
  std::string perf_db_directory; // "" when none: roofline only
  std::size_t perf_db_points = 0;
  PlanResult result;
  std::string model_reference;
  TailOptions tail_options;   // with --slo
  std::vector<RowTail> tails; // the simulated rows, best first (empty without --slo)
};

// `plan --list-models`: each built-in preset with its shape; `plan --list-systems`: each system
// under profiles/systems with its GPU, memory and bandwidth.
std::string model_listing();
std::string system_listing();

// The request the options describe, validated (InputError naming the flag).
PlanRequest plan_request(const PlanOptions& options);
// The system named by --system, and its perf database (profiles/perf/<system> or --perf-db; none:
// the roofline alone). The database keeps a pointer to `system`.
perf::SystemSpec load_plan_system(const PlanOptions& options);
perf::PerfDatabase load_perf_database(const PlanOptions& options, const perf::SystemSpec& system);
// "TTFT <= 2000 ms, TPOT <= 30 ms (33.3 tokens/s/user)", and the terms a row misses ("TTFT 2410 ms
// misses --ttft 2000 and …"; "" when it meets them all).
std::string sla_text(const PlanRequest& request);
std::string sla_misses(const PlanRow& row, const PlanRequest& request);
// One configuration's row as JSON (plan's Pareto rows, plan estimate's answer).
nlohmann::json row_json(const PlanRow& row, const PlanRequest& request);

// Validates the options (InputError naming the flag), searches, archives metrics and writes the
// plot/bench profile. Throws GoalNotMet naming the closest configuration when nothing meets the SLA.
PlanRun run_plan(const PlanOptions& options, const archive::RunContext& context);

Table pareto_table(const PlanRun& run);
// With --slo: each simulated row's highest rate meeting the SLOs, its latency percentiles there,
// and (with --rate) its verdict at that rate.
Table tail_table(const PlanRun& run);
nlohmann::json to_json(const PlanRun& run);
// {"weights", "activations", "kv_cache"}: what plan and plan estimate priced.
nlohmann::json precision_json(const perf::ServingPrecision& precision);
// Lines above the table: the SLA, the search's size and time, the chosen configuration.
std::string plan_summary(const PlanRun& run);
// --emit: the launch script for the chosen (or target-rate) configuration.
std::string emit_launch(const PlanRun& run, const std::string& engine);

} // namespace optkit::plan
