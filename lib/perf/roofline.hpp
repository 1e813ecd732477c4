// Speed-of-light costs of the operators a transformer step is made of: the FLOPs and bytes each
// must move, and the time a GPU needs at peak. The perf database expresses measurements as a
// utilization of these times; with no data, default efficiencies stand in for measurements.
#pragma once

#include "perf/estimate.hpp"
#include "perf/system_spec.hpp"

#include <string>

namespace optkit::perf {

struct OpCost {
  double flops = 0;
  double bytes = 0; // memory traffic
};

// attention: prefill (compute-bound, tensor peak); decode_attention: reading the KV cache.
enum class OpClass { gemm, attention, decode_attention, memory };
enum class CollectiveOp { all_reduce, all_gather, all_to_all, p2p };

OpCost gemm_cost(double m, double n, double k, double weight_bytes, double activation_bytes);
// Causal prefill of `batch` sequences of `seq` new tokens after `prefix` cached ones.
OpCost attention_prefill_cost(double batch, double seq, double prefix, double heads, double kv_heads, double qk_dim,
                              double v_dim, double kv_bytes);
// One decode token per sequence against `kv_len` cached tokens; `kv_elements` cache elements per
// token (2·kv_heads·head_dim, or MLA's shared latent) read once per sequence.
OpCost attention_decode_cost(double batch, double kv_len, double heads, double qk_dim, double v_dim, double kv_elements,
                             double kv_bytes, double tokens_per_sequence = 1);
OpCost moe_cost(double routed_tokens, double hidden, double inter, double experts_touched, double weight_bytes,
                double activation_bytes);

// Bytes a collective puts on each GPU's link.
double wire_bytes(CollectiveOp op, double bytes, int gpus);

// Time at peak (µs): max(flops / peak, bytes / bandwidth).
double speed_of_light_us(const OpCost& cost, double peak_flops, double bytes_per_s);
double collective_speed_of_light_us(const SystemSpec& system, CollectiveOp op, double bytes, int gpus);

// No data: speed of light divided by the system's default efficiencies, plus a kernel's fixed cost.
Estimate roofline_estimate(const SystemSpec& system, OpClass op_class, const OpCost& cost, double peak_flops);
// Attention (OpClass attention or decode_attention) in a serving engine's own kernels: the same
// over that engine's attention efficiencies (DefaultEfficiency::attention_of), with the system's
// fallback label.
Estimate engine_attention_estimate(const SystemSpec& system, const AttentionEfficiency& kernels, OpClass op_class,
                                   const OpCost& cost, double peak_flops);
Estimate roofline_collective(const SystemSpec& system, CollectiveOp op, double bytes, int gpus);

std::string collective_name(CollectiveOp op);

} // namespace optkit::perf
