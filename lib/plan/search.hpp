// The configuration search: every worker layout (TP × PP, and for MoE models attention DP × EP)
// that fits the GPU count, every batch size of AIConfigurator's schedules, each serving mode;
// memory-infeasible points are dropped before they are estimated. The result keeps every feasible
// estimate, its Pareto frontier (tokens/s/GPU against tokens/s/user), the best configuration
// under the SLA and, when nothing meets it, the closest one.
#pragma once

#include "perf/memory_model.hpp"
#include "perf/model_arch.hpp"
#include "perf/perf_database.hpp"
#include "perf/step_model.hpp"
#include "perf/system_spec.hpp"
#include "plan/estimators.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace optkit::plan {

enum class ServingMode { static_batching, aggregated, disaggregated };
std::string mode_name(ServingMode mode); // "static", "agg", "disagg"
ServingMode parse_mode(const std::string& text);

struct PlanRequest {
  perf::ModelArch model;
  int gpus = 8;
  Workload workload;
  perf::Engine engine = perf::Engine::vllm;
  // Attention runs in the engine's own kernels; `plan profile` asks for optkit's profiled ones so
  // that its search looks up, and so measures, the attention sites.
  bool profiled_attention = false;
  perf::AttentionKernels attention_kernels() const {
    return profiled_attention ? std::nullopt : perf::AttentionKernels(engine);
  }
  perf::ServingPrecision precision;
  double memory_fraction = 0.9;
  double ttft_limit_ms = 2000;
  double tpot_limit_ms = 30;
  std::optional<double> request_latency_limit_ms; // end to end: TTFT + (OSL − 1) · TPOT
  bool tpot_from_request_latency = false;         // tpot_limit_ms is what that budget allows at TTFT 0
  std::vector<ServingMode> modes = {ServingMode::aggregated, ServingMode::disaggregated};
  Speculation speculation;
  double moe_power_law_alpha = 1.01;
  DisaggregationFactors disaggregation;
  std::optional<double> target_requests_per_s;
};

struct PlanRow {
  ServingMode mode = ServingMode::aggregated;
  perf::ParallelConfig parallel; // the aggregated/static worker, or the decode worker
  int batch = 0;                 // sequences in flight per worker (decode batch for disagg)
  int ctx_tokens = 0;            // aggregated: prompt tokens per mixed step
  int replicas = 0;              // workers (agg/static) or xPyD units (disagg) on `gpus`
  // Disaggregated only.
  perf::ParallelConfig prefill_parallel;
  int prefill_batch = 0;
  int prefill_workers = 0;
  int decode_workers = 0;
  double kv_transfer_ms = 0;

  double ttft_ms = 0;
  double tpot_ms = 0;
  double request_latency_ms = 0; // TTFT + (OSL − 1) · TPOT, set by select_configurations
  double tokens_per_s_per_user = 0;
  double tokens_per_s_per_gpu = 0;
  double requests_per_s = 0; // one replica (worker or xPyD unit)
  int unit_gpus = 0;         // GPUs of one replica
  double memory_gib = 0;     // per GPU of the (decode) worker at this batch
  std::uint8_t sources = 0;
  bool meets_sla = false; // set by select_configurations
};

struct TargetRatePlan {
  std::size_t row = 0;
  int replicas = 0;
  int gpus = 0;
};

struct PlanResult {
  std::vector<PlanRow> rows;            // every feasible configuration estimated
  std::vector<std::size_t> pareto;      // frontier over all modes, fastest per user first
  std::optional<std::size_t> best;      // most tokens/s/GPU meeting the SLA
  std::optional<std::size_t> closest;   // smallest worst SLA overshoot, when nothing meets it
  std::optional<TargetRatePlan> target; // fewest GPUs sustaining --target-rate
  std::size_t evaluations = 0;          // configurations estimated
  std::size_t memory_infeasible = 0;    // configurations dropped by the memory check
  std::size_t worker_layouts = 0;
  double seconds = 0;
};

// Worker layouts with at most `max_gpus` GPUs (dividing it) that the model's shapes allow.
std::vector<perf::ParallelConfig> worker_layouts(const perf::ModelArch& model, const perf::SystemSpec& system,
                                                 int max_gpus);
// Whether `engine` can run a worker of this layout (llama-server: no TP with PP, no DP or EP).
bool engine_can_run(perf::Engine engine, const perf::ParallelConfig& layout);
// AIConfigurator's batch schedules: aggregated 1…1024, disaggregated decode 1…512.
const std::vector<int>& aggregated_batches();
const std::vector<int>& decode_batches();

// Prompt tokens a request prefills: ISL less the cached prefix, at least 1.
double prompt_tokens(const PlanRequest& request);

// One configuration priced exactly as the search prices it: `plan estimate` and the search share
// these, so an estimate's row is the row the search printed for the same configuration.
struct WorkerConfiguration {
  ServingMode mode = ServingMode::aggregated; // static, aggregated, or a disaggregated decode worker
  int batch = 1;                              // sequences in flight
  double ctx_tokens = 0;                      // aggregated: prompt tokens per mixed step
};
// Why a configuration has no row: it does not fit, an aggregated prompt budget exceeds the prompts
// of the batch, or the batch has no room for a decode slot beside its prompts (Alg. 2 line 17).
enum class Unpriced { out_of_memory, prompt_budget_over_batch, no_decode_slot };
// A priced configuration, or why there is none (std::expected's shape; libstdc++ 12's needs C++20
// concepts clang 14 lacks).
template <typename T> class Priced {
public:
  Priced(T value) : m_value(std::move(value)) {}
  Priced(Unpriced why) : m_why(why) {}
  explicit operator bool() const { return m_value.has_value(); }
  const T& operator*() const { return *m_value; }
  const T* operator->() const { return &*m_value; }
  Unpriced error() const { return m_why; }

private:
  std::optional<T> m_value;
  Unpriced m_why = Unpriced::out_of_memory;
};
using PricedRow = Priced<PlanRow>;
// The memory a worker is checked against: a static batch prefills all its prompts in one step, an
// aggregated step takes its prompt chunk and 1024 decode tokens, a disaggregated decode worker
// 1024 decode tokens.
perf::MemoryBudget worker_memory(const PlanRequest& request, const perf::SystemSpec& system,
                                 const perf::ParallelConfig& parallel, const WorkerConfiguration& configuration);
// A static or aggregated worker running `model`'s layout.
PricedRow price_worker(const PlanRequest& request, const perf::SystemSpec& system, const perf::StepModel& model,
                       const WorkerConfiguration& configuration);

// Disaggregated pools: a prefill worker's batch prefilled at once, a decode worker's generation
// phase; then Algorithm 3's rate matching of the two into an xPyD unit.
struct PrefillCandidate {
  perf::ParallelConfig parallel;
  int batch = 0;
  double ttft_ms = 0;
  double requests_per_s = 0;
  std::uint8_t sources = 0;
};
struct DecodeCandidate {
  perf::ParallelConfig parallel;
  int batch = 0;
  double tpot_ms = 0;
  double requests_per_s = 0;
  double memory_gib = 0;
  std::uint8_t sources = 0;
};
Priced<PrefillCandidate> price_prefill(const PlanRequest& request, const perf::SystemSpec& system,
                                       const perf::StepModel& model, int batch);
Priced<DecodeCandidate> price_decode(const PlanRequest& request, const perf::SystemSpec& system,
                                     const perf::StepModel& model, int batch);
// The step a prefill worker runs: `batch` whole prompts past the cached prefix.
perf::StepShape prefill_shape(const PlanRequest& request, int batch);
// How many prefill and decode workers one xPyD unit has (0, 0: rate-matched, Algorithm 3).
struct WorkerCounts {
  int prefill = 0;
  int decode = 0;
};
// nullopt when no xPyD unit of the two fits the GPUs.
std::optional<PlanRow> disaggregated_row(const PlanRequest& request, const perf::SystemSpec& system,
                                         const PrefillCandidate& prefill, const DecodeCandidate& decode,
                                         WorkerCounts workers = {});
// The request latency and SLA verdict of a priced row (what select_configurations sets).
void judge_sla(const PlanRequest& request, PlanRow& row);

// Enumeration: every worker layout × batch × mode the request allows, memory-infeasible ones
// counted and dropped, the rest estimated into `rows` (nothing selected yet).
PlanResult enumerate_configurations(const PlanRequest& request, const perf::SystemSpec& system,
                                    const perf::PerfDatabase& db);
// Selection among enumerated rows (selection.cpp): the Pareto frontier, the best under the SLA, the
// closest when none meets it, the fewest GPUs sustaining the target rate.
void select_configurations(const PlanRequest& request, PlanResult& result);
// Both, timed.
PlanResult search(const PlanRequest& request, const perf::SystemSpec& system, const perf::PerfDatabase& db);

// The Pareto-optimal subset of `indices` (more tokens/s/GPU at no less tokens/s/user).
std::vector<std::size_t> pareto_front(const std::vector<PlanRow>& rows, std::vector<std::size_t> indices);

// "agg tp4pp1 ×2, batch 64" or "disagg 4P(tp1, batch 1) + 2D(tp2, batch 80)".
std::string describe(const PlanRow& row, bool moe);

} // namespace optkit::plan
