#include "runtime/activation_precision.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

namespace optkit::runtime {

ActivationPrecision
parse_activation_precision(std::string_view text, std::string_view what) {
  if (text == "fp32")
    return ActivationPrecision::fp32;
  if (text == "bf16")
    return ActivationPrecision::bf16;
  throw InputError(fmt::format("{} '{}' is not an activation precision; use fp32 (the default) or bf16", what, text));
}

std::string_view
activation_precision_name(ActivationPrecision precision) {
  return precision == ActivationPrecision::bf16 ? "bf16" : "fp32";
}

} // namespace optkit::runtime
