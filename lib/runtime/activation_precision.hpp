// How BF16 weights multiply their activations on the CPU (--activations, config `activations`):
//  - fp32 (the default): activations keep fp32 precision in every product. The AVX512_BF16 and AMX
//    kernels split each activation into two BF16 halves (x = hi + lo) and pair both with the same
//    weight, so results stay within ~1e-5 of an fp32 product and prefill agrees with decode.
//  - bf16: each activation is rounded to the nearest BF16 (ties to even) before a BF16 weight
//    multiplies it, as llama.cpp does for BF16 weights and as PyTorch does for BF16 inputs: twice
//    the products per instruction in prefill. Every path rounds the same way (the prefill panels,
//    the decode row-dots, the OpenBLAS fallback), accumulating in fp32.
// F32 and F16 weights, quantized weights and everything outside the linear layers (norms,
// attention, the KV cache) are not affected by either mode.
#pragma once

#include <string_view>

namespace optkit::runtime {

enum class ActivationPrecision { fp32, bf16 };

// "fp32" or "bf16"; anything else is an InputError naming `what` (the flag or config key) and the
// value.
ActivationPrecision parse_activation_precision(std::string_view text, std::string_view what = "--activations");
std::string_view activation_precision_name(ActivationPrecision precision);

} // namespace optkit::runtime
