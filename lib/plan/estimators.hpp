// AIConfigurator's serving-mode estimators (Algorithms 1–3) over a StepModel, plus speculative
// decoding. Times are milliseconds; every result carries the source labels of its steps.
#pragma once

#include "perf/step_model.hpp"

#include <cstdint>
#include <optional>

namespace optkit::plan {

struct Workload {
  double isl = 4000;
  double osl = 1000;
  double prefix = 0; // cached prompt tokens (prefix cache hits)
};

// Draft-and-verify decoding: `draft_tokens` proposed per step, each accepted with probability
// `acceptance` (independently, until the first rejection); drafting one token costs
// `draft_cost` × a plain decode step (EAGLE/MTP heads: a few percent).
struct Speculation {
  int draft_tokens = 0;
  double acceptance = 0.7;
  double draft_cost = 0.05;
  bool enabled() const { return draft_tokens > 0; }
  // Expected tokens a step emits: (1 − a^(k+1)) / (1 − a).
  double tokens_per_step() const;
};

struct LatencyEstimate {
  double ttft_ms = 0;
  double tpot_ms = 0;
  std::uint8_t sources = 0;
  double max_requests_per_s = 0; // aggregated: the prompt-admission bound (0: none)
};

// Time per output token of a decode step with `batch` sequences at `kv_len`, speculation included.
perf::Estimate decode_token_time(const perf::StepModel& model, double batch, double kv_len,
                                 const Speculation& speculation);

// Algorithm 1's generation phase: mean time per output token over OSL - 1 decode steps at growing
// KV length, sampled every `stride` tokens (what a disaggregated decode worker spends).
perf::Estimate estimate_generation(const perf::StepModel& model, const Workload& workload, double batch,
                                   const Speculation& speculation, int stride = 32);

// Algorithm 1: one batch prefilled together, then decoded in lock step; decode cost sampled every
// `stride` tokens.
LatencyEstimate estimate_static(const perf::StepModel& model, const Workload& workload, double batch,
                                const Speculation& speculation, int stride = 32);

// Algorithm 2's steps 1–3: how many mixed (prompt + decode) steps a batch takes, how many
// generation-only ones follow, and the mixed step's shape. nullopt when the batch cannot hold the
// context requests plus one decode slot (Alg. 2 line 17).
struct AggregatedSteps {
  double total_ctx_steps = 0;    // steps to prefill the whole batch
  double mix_steps = 1;          // steps carrying prompt tokens
  double gen_steps = 0;          // generation-only steps after them
  double mix_gen_tokens = 0;     // sequences decoding in a mixed step
  double context_bound_wait = 1; // steps a sequence waits per token when prompts dominate
  double kv_mid = 0;             // the KV length the steps are priced at (ISL + OSL/2)
  perf::StepShape mix;
};
std::optional<AggregatedSteps> aggregated_steps(const Workload& workload, double batch, double ctx_tokens,
                                                const Speculation& speculation);

// Algorithm 2: continuous batching with `ctx_tokens` prompt tokens per mixed step. Returns false
// when the batch cannot hold the context requests plus one decode slot (Alg. 2 line 17).
bool estimate_aggregated(const perf::StepModel& model, const Workload& workload, double batch, double ctx_tokens,
                         const Speculation& speculation, LatencyEstimate& out);

// Algorithm 3's rate matching for one prefill and one decode candidate.
struct DisaggregationFactors {
  double alpha_prefill = 0.9;
  double alpha_decode = 0.92;
  double beta_ttft = 1.8;
};
struct RateMatch {
  int prefill_workers = 0;
  int decode_workers = 0;
  double requests_per_s = 0; // of one xPyD unit
  int gpus = 0;              // of one xPyD unit
};
// Best x ∈ [1, 32], y ∈ [1, 64] by requests/s per GPU among units whose GPU count divides
// `total_gpus` (AIConfigurator's valid totals); no such unit → gpus = 0.
RateMatch rate_match(double prefill_requests_per_s, int prefill_gpus, double decode_requests_per_s, int decode_gpus,
                     int total_gpus, const DisaggregationFactors& factors);
// One given unit of x prefill and y decode workers: the slower pool, derated, sets its rate.
RateMatch unit_rate(double prefill_requests_per_s, int prefill_gpus, double decode_requests_per_s, int decode_gpus,
                    int x, int y, const DisaggregationFactors& factors);

} // namespace optkit::plan
