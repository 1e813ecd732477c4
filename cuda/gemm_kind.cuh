// The GEMM input types optkit measures and runs. Plain C++: host code includes it without CUDA.
#pragma once

#include <optional>
#include <string_view>

namespace optkit::cuda {

// bf16 / fp16: 16-bit inputs and output; fp8: E4M3 inputs, BF16 output (compute capability ≥ 8.9);
// int8: INT8 inputs, INT32 output.
enum class GemmKind { bf16, fp16, fp8, int8 };

inline const char*
to_string(GemmKind kind) {
  switch (kind) {
  case GemmKind::bf16:
    return "bf16";
  case GemmKind::fp16:
    return "fp16";
  case GemmKind::fp8:
    return "fp8";
  case GemmKind::int8:
    return "int8";
  }
  return "?";
}

inline std::optional<GemmKind>
parse_gemm_kind(std::string_view text) {
  for (auto kind : {GemmKind::bf16, GemmKind::fp16, GemmKind::fp8, GemmKind::int8})
    if (text == to_string(kind))
      return kind;
  return std::nullopt;
}

} // namespace optkit::cuda
