// ggml's quantizers and decoders for the tensor types of model/ggml_types.hpp (ggml-common.h's
// layouts): plain F32 / F16 / BF16 and the block quantizations llama.cpp's k-quant mixtures use —
// Q8_0, Q5_0 and Q5_1 (32 values a block) and Q4_K, Q5_K and Q6_K (256-value super-blocks of 8 or
// 16 sub-blocks with 6- or 8-bit sub-scales). A row of a tensor is a whole number of blocks.
//
// quantize_row() follows llama.cpp's reference quantizers (quantize_row_*_ref): without an
// importance vector, Q8_0 rounds x / (amax/127) half away from zero; Q5_0 / Q5_1 map the block's
// extreme (or its range) onto the 5-bit grid; the k-quants fit each sub-block's scale (and min)
// by a weighted least-squares search over candidate grids, then quantize the sub-scales to 6 or
// 8 bits under one fp16 super-block scale. With an importance vector (one value per column, the
// mean squared activation an imatrix records) the k-quants and Q5_0 / Q5_1 weight each value's
// error by it (quantize_*_impl), and the sub-scales are fitted to their own weighted errors.
#pragma once

#include "model/ggml_types.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace optkit::quant {

using model::GgmlType;

// Quantizes one row of `x.size()` values (a multiple of the block size) into `out`
// (ggml_row_bytes bytes). `importance`: one weight per value of the row, or empty.
void quantize_row(GgmlType type, std::span<const float> x, std::span<const float> importance, std::byte* out);
// Decodes one row of `count` values.
void dequantize_row(GgmlType type, const std::byte* row, std::int64_t count, float* out);

// Rounds one row of activations in place as llama.cpp's CPU backend rounds them before its dot
// products with weights of type `weight` (the type's vec_dot_type): to 8-bit integers under a
// float scale per 256 values (Q8_K) for the k-quants, under an fp16 scale per 32 values (Q8_0,
// Q8_1) for Q8_0, Q5_0 and Q5_1; to fp16 or bf16 for F16 and BF16 weights; F32 untouched.
// `x.size()` is a whole number of the weight's blocks.
void round_dot_product_input(GgmlType weight, std::span<float> x);

} // namespace optkit::quant
