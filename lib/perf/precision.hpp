// Number formats the planner prices: what a weight, an activation or a KV-cache entry costs in
// bytes, and which tensor-core rate a matrix product runs at.
#pragma once

#include <string>
#include <string_view>

namespace optkit::perf {

enum class Precision { bf16, fp16, fp8, int8, int4 };

std::string_view precision_name(Precision precision);
// "bf16" | "fp16" | "fp8" | "int8" | "int4"; InputError naming `flag` otherwise.
Precision parse_precision(std::string_view text, std::string_view flag);

// Bytes per element (int4: 0.5 plus its group scales, one 16-bit scale per 128 weights).
double bytes_per_element(Precision precision);

// A matrix product's kind, the key of the GEMM table: both operands in one format ("bf16",
// "fp8", "int8") or a weight-only format over 16-bit activations ("w8a16", "w4a16").
std::string gemm_kind(Precision weights, Precision activations);

struct ServingPrecision {
  Precision weights = Precision::bf16;
  Precision activations = Precision::bf16;
  Precision kv_cache = Precision::bf16;
};

} // namespace optkit::perf
