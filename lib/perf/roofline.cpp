#include "perf/roofline.hpp"

#include <algorithm>

namespace optkit::perf {

std::string
source_names(std::uint8_t sources) {
  std::string text;
  for (const auto& [bit, name] : {std::pair{measured, "measured"},
                                  {interpolated, "interpolated"},
                                  {extrapolated, "extrapolated"},
                                  {roofline, "roofline"},
                                  {calibrated, "calibrated"}})
    if (sources & bit)
      text += (text.empty() ? "" : "+") + std::string(name);
  return text.empty() ? "none" : text;
}

OpCost
gemm_cost(double m, double n, double k, double weight_bytes, double activation_bytes) {
  return {2.0 * m * n * k, m * k * activation_bytes + k * n * weight_bytes + m * n * 2.0};
}

OpCost
attention_prefill_cost(double batch, double seq, double prefix, double heads, double kv_heads, double qk_dim,
                       double v_dim, double kv_bytes) {
  // Causal: token i attends to prefix + i + 1 keys, (seq + 1) / 2 new keys on average.
  const double keys = prefix + (seq + 1.0) / 2.0;
  const double flops = 2.0 * batch * heads * seq * keys * (qk_dim + v_dim);
  const double bytes =
      batch * (seq * heads * (qk_dim + v_dim) * 2.0 + (seq + prefix) * kv_heads * (qk_dim + v_dim) * kv_bytes);
  return {flops, bytes};
}

OpCost
attention_decode_cost(double batch, double kv_len, double heads, double qk_dim, double v_dim, double kv_elements,
                      double kv_bytes, double tokens_per_sequence) {
  const double flops = 2.0 * batch * tokens_per_sequence * heads * kv_len * (qk_dim + v_dim);
  const double bytes = batch * (kv_len * kv_elements * kv_bytes + tokens_per_sequence * heads * (qk_dim + v_dim) * 2.0);
  return {flops, bytes};
}

OpCost
moe_cost(double routed_tokens, double hidden, double inter, double experts_touched, double weight_bytes,
         double activation_bytes) {
  const double flops = 2.0 * routed_tokens * hidden * inter * 3.0;
  const double bytes = experts_touched * 3.0 * hidden * inter * weight_bytes +
                       routed_tokens * (hidden * activation_bytes + hidden * 2.0 + 2.0 * inter * 2.0);
  return {flops, bytes};
}

double
wire_bytes(CollectiveOp op, double bytes, int gpus) {
  if (gpus <= 1)
    return 0;
  const double share = double(gpus - 1) / gpus;
  switch (op) {
  case CollectiveOp::all_reduce:
    return 2.0 * share * bytes;
  case CollectiveOp::all_gather:
  case CollectiveOp::all_to_all:
    return share * bytes;
  case CollectiveOp::p2p:
    return bytes;
  }
  return bytes;
}

double
speed_of_light_us(const OpCost& cost, double peak_flops, double bytes_per_s) {
  return std::max(cost.flops / peak_flops, cost.bytes / bytes_per_s) * 1e6;
}

double
collective_speed_of_light_us(const SystemSpec& system, CollectiveOp op, double bytes, int gpus) {
  const int peers = op == CollectiveOp::p2p ? std::max(gpus, 2) : gpus;
  return wire_bytes(op, bytes, gpus) / system.link_bytes_per_s(peers) * 1e6;
}

namespace {

// Speed of light over `compute_eff` of the tensor peak and `bandwidth_eff` of the memory bandwidth
// (a memory-bound class moves bytes only), plus a kernel's fixed cost.
Estimate
derated(const SystemSpec& system, OpClass op_class, const OpCost& cost, double peak_flops, double compute_eff,
        double bandwidth_eff, SourceLabel label) {
  const bool memory_bound = op_class == OpClass::memory || op_class == OpClass::decode_attention;
  const double compute_s = memory_bound ? 0.0 : cost.flops / (peak_flops * compute_eff);
  const double memory_s = cost.bytes / (system.memory_bandwidth_gbs * 1e9 * bandwidth_eff);
  return {std::max(compute_s, memory_s) * 1e6 + system.efficiency.kernel_overhead_us, label};
}

} // namespace

Estimate
roofline_estimate(const SystemSpec& system, OpClass op_class, const OpCost& cost, double peak_flops) {
  const auto& eff = system.efficiency;
  const double compute_eff = op_class == OpClass::attention ? eff.attention : eff.gemm;
  const double bandwidth_eff = op_class == OpClass::decode_attention ? eff.decode_attention : eff.memory;
  return derated(system, op_class, cost, peak_flops, compute_eff, bandwidth_eff, eff.fallback_label());
}

Estimate
engine_attention_estimate(const SystemSpec& system, const AttentionEfficiency& kernels, OpClass op_class,
                          const OpCost& cost, double peak_flops) {
  const auto& eff = system.efficiency;
  const double bandwidth_eff = op_class == OpClass::decode_attention ? kernels.decode : eff.memory;
  return derated(system, op_class, cost, peak_flops, kernels.prefill, bandwidth_eff, eff.fallback_label());
}

Estimate
roofline_collective(const SystemSpec& system, CollectiveOp op, double bytes, int gpus) {
  if (gpus <= 1 && op != CollectiveOp::p2p)
    return {0, 0};
  return {collective_speed_of_light_us(system, op, bytes, gpus) / system.efficiency.communication +
              system.collective_latency_us,
          system.efficiency.fallback_label()};
}

std::string
collective_name(CollectiveOp op) {
  switch (op) {
  case CollectiveOp::all_reduce:
    return "all_reduce";
  case CollectiveOp::all_gather:
    return "all_gather";
  case CollectiveOp::all_to_all:
    return "all_to_all";
  case CollectiveOp::p2p:
    return "p2p";
  }
  return "?";
}

} // namespace optkit::perf
