#include "perf/precision.hpp"

#include "core/error.hpp"

#include <array>

namespace optkit::perf {

namespace {
constexpr std::array<std::string_view, 5> precision_names = {"bf16", "fp16", "fp8", "int8", "int4"};
}

std::string_view
precision_name(Precision precision) {
  return precision_names[static_cast<std::size_t>(precision)];
}

Precision
parse_precision(std::string_view text, std::string_view flag) {
  for (std::size_t i = 0; i < precision_names.size(); ++i)
    if (text == precision_names[i])
      return static_cast<Precision>(i);
  throw InputError(std::string(flag) + " " + std::string(text) +
                   ": unknown number format; use bf16, fp16, fp8, int8 or int4");
}

double
bytes_per_element(Precision precision) {
  switch (precision) {
  case Precision::bf16:
  case Precision::fp16:
    return 2.0;
  case Precision::fp8:
  case Precision::int8:
    return 1.0;
  case Precision::int4:
    return 0.5 + 2.0 / 128.0;
  }
  return 2.0;
}

std::string
gemm_kind(Precision weights, Precision activations) {
  const bool wide_activations = activations == Precision::bf16 || activations == Precision::fp16;
  if (weights == activations)
    return std::string(precision_name(weights));
  if (wide_activations && (weights == Precision::int8 || weights == Precision::fp8))
    return "w8a16";
  if (wide_activations && weights == Precision::int4)
    return "w4a16";
  if (weights == Precision::bf16 || weights == Precision::fp16)
    return std::string(precision_name(weights));
  // Mixed low-bit pairs (int4 weights with fp8 activations, ...) run at the activation's rate.
  return std::string(precision_name(activations));
}

} // namespace optkit::perf
