#include "plan/estimators.hpp"

#include <algorithm>
#include <cmath>

namespace optkit::plan {

double
Speculation::tokens_per_step() const {
  if (!enabled())
    return 1.0;
  if (acceptance >= 1.0)
    return draft_tokens + 1.0;
  return (1.0 - std::pow(acceptance, draft_tokens + 1)) / (1.0 - acceptance);
}

perf::Estimate
decode_token_time(const perf::StepModel& model, double batch, double kv_len, const Speculation& speculation) {
  if (!speculation.enabled())
    return model.decode_interval(batch, kv_len);
  perf::Estimate step = model.decode_interval(batch, kv_len, speculation.draft_tokens + 1);
  step += model.decode_interval(batch, kv_len).scaled(speculation.draft_cost * speculation.draft_tokens);
  return step.scaled(1.0 / speculation.tokens_per_step());
}

LatencyEstimate
estimate_static(const perf::StepModel& model, const Workload& workload, double batch, const Speculation& speculation,
                int stride) {
  LatencyEstimate out;
  perf::StepShape prefill;
  prefill.prefill_requests = batch;
  prefill.prefill_tokens = std::max(1.0, workload.isl - workload.prefix);
  prefill.prefix = workload.prefix;
  const perf::Estimate ttft = model.step(prefill);
  const perf::Estimate tpot = estimate_generation(model, workload, batch, speculation, stride);
  out.ttft_ms = ttft.us / 1000.0;
  out.tpot_ms = tpot.us / 1000.0;
  out.sources = ttft.sources | tpot.sources;
  return out;
}

perf::Estimate
estimate_generation(const perf::StepModel& model, const Workload& workload, double batch,
                    const Speculation& speculation, int stride) {
  const double steps = workload.osl - 1;
  perf::Estimate total;
  if (steps <= 0)
    return total;
  for (double k = 0; k < steps; k += stride)
    total +=
        decode_token_time(model, batch, workload.isl + k + 1, speculation).scaled(std::min<double>(stride, steps - k));
  return total.scaled(1.0 / steps);
}

std::optional<AggregatedSteps>
aggregated_steps(const Workload& workload, double batch, double ctx_tokens, const Speculation& speculation) {
  const double isl = std::max(1.0, workload.isl - workload.prefix);
  const double osl = workload.osl;
  AggregatedSteps plan;
  // Step 1: steps needed to prefill the whole batch.
  plan.total_ctx_steps = std::ceil(isl * batch / ctx_tokens);
  // Step 2: how mixed steps split between prompt and decode tokens.
  plan.gen_steps = osl - 1;
  if (batch > 1) {
    plan.mix_steps = plan.total_ctx_steps;
    if (plan.total_ctx_steps >= osl) {
      plan.gen_steps = 0;
      plan.mix_gen_tokens = std::max(1.0, std::floor(batch / (plan.total_ctx_steps / osl)));
      // Only mix_gen_tokens of the batch advance per step, so each sequence waits batch /
      // mix_gen_tokens steps per token (AIConfigurator's TPOT = L_mix would let throughput exceed the
      // prefill rate).
      plan.context_bound_wait = batch / plan.mix_gen_tokens;
    } else {
      plan.gen_steps = osl - plan.mix_steps;
      plan.mix_gen_tokens = batch - std::ceil(ctx_tokens / isl);
      if (plan.mix_gen_tokens < 1)
        return std::nullopt;
    }
  }
  // Step 3: the mixed step's shape. Its prompt tokens are whole prompts, or one chunk of a longer
  // prompt (chunked prefill).
  plan.kv_mid = workload.isl + osl / 2.0;
  perf::StepShape& mix = plan.mix;
  if (ctx_tokens >= isl) {
    mix.prefill_requests = ctx_tokens / isl;
    mix.prefill_tokens = isl;
    mix.prefix = workload.prefix;
  } else {
    mix.prefill_requests = 1;
    mix.prefill_tokens = ctx_tokens;
    mix.prefix = workload.prefix + (isl - ctx_tokens) / 2.0;
  }
  mix.decode_requests = plan.mix_gen_tokens;
  mix.kv_len = plan.kv_mid;
  if (speculation.enabled())
    mix.tokens_per_decode = speculation.draft_tokens + 1;
  return plan;
}

bool
estimate_aggregated(const perf::StepModel& model, const Workload& workload, double batch, double ctx_tokens,
                    const Speculation& speculation, LatencyEstimate& out) {
  const std::optional<AggregatedSteps> plan = aggregated_steps(workload, batch, ctx_tokens, speculation);
  if (!plan)
    return false;
  const double isl = std::max(1.0, workload.isl - workload.prefix);
  const perf::Estimate mix_latency = model.step(plan->mix);
  const perf::Estimate gen_latency = decode_token_time(model, batch, plan->kv_mid, speculation);
  // Step 4: TTFT with AIConfigurator's piecewise-linear queueing correction.
  const double correction = std::min(2.0 + (plan->total_ctx_steps - 3.0) / 20.0, 4.0);
  out.ttft_ms = mix_latency.us / 1000.0 * std::ceil(isl / ctx_tokens) * correction;
  // Step 5: TPOT, a step-weighted mean that skips the first three (jittery) mixed steps.
  const double mix_weight = std::max(1.0, plan->mix_steps - 3.0);
  const double mix_token_us = mix_latency.us / speculation.tokens_per_step() * plan->context_bound_wait;
  if (batch > 1)
    out.tpot_ms =
        (mix_token_us * mix_weight + gen_latency.us * plan->gen_steps) / (mix_weight + plan->gen_steps) / 1000.0;
  else
    out.tpot_ms = gen_latency.us / 1000.0;
  out.sources = mix_latency.sources | gen_latency.sources;
  // Steady state cannot finish requests faster than mixed steps admit prompts.
  out.max_requests_per_s = std::min(ctx_tokens, isl * batch) / isl / (mix_latency.us / 1e6);
  return true;
}

RateMatch
rate_match(double prefill_requests_per_s, int prefill_gpus, double decode_requests_per_s, int decode_gpus,
           int total_gpus, const DisaggregationFactors& factors) {
  RateMatch best;
  double best_per_gpu = 0;
  for (int x = 1; x <= 32 && x * prefill_gpus + decode_gpus <= total_gpus; ++x)
    for (int y = 1; y <= 64; ++y) {
      const int gpus = x * prefill_gpus + y * decode_gpus;
      if (gpus > total_gpus)
        break;
      if (total_gpus % gpus != 0)
        continue;
      const RateMatch unit =
          unit_rate(prefill_requests_per_s, prefill_gpus, decode_requests_per_s, decode_gpus, x, y, factors);
      if (unit.requests_per_s / gpus > best_per_gpu) {
        best_per_gpu = unit.requests_per_s / gpus;
        best = unit;
      }
    }
  return best;
}

RateMatch
unit_rate(double prefill_requests_per_s, int prefill_gpus, double decode_requests_per_s, int decode_gpus, int x, int y,
          const DisaggregationFactors& factors) {
  const double rate =
      std::min(prefill_requests_per_s * x * factors.alpha_prefill, decode_requests_per_s * y * factors.alpha_decode);
  return {x, y, rate, x * prefill_gpus + y * decode_gpus};
}

} // namespace optkit::plan
