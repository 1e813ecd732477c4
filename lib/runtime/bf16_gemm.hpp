// The BF16 matrix product of prefill: y[i·ldy + r] = Σ_c W[r, c]·x[i, c] for BF16 weights, with
// AVX512_BF16 dot products (VDPBF16PS: 32 bf16 products per instruction, fp32 accumulation) on
// W's own BF16 values, never widened to fp32. Chosen at run time: bf16_gemm_supported() says
// whether this build and CPU have it (x86-64 with AVX512_BF16, not OPTKIT_PORTABLE_KERNELS, not
// OPTKIT_CPU_BASELINE=1); elsewhere the runtime keeps its widened-sgemm path.
//
// Activations are fp32 and must become BF16 pairs for the instruction. Two encodings:
//  - rounded: each x rounded to nearest-even BF16, two k per product (llama.cpp's numerics for BF16
//    weights; twice the products per instruction);
//  - split: x = hi + lo with hi, lo BF16 and W's value paired with itself, one k per product, so x
//    keeps about 16 significant bits and results stay within ~1e-5 of fp32 (the default).
#pragma once

#include "runtime/dot_rows.hpp"

#include <cstdint>
#include <vector>

namespace optkit::runtime {

enum class Bf16Activations { rounded, split };

// x [m, cols] encoded for bf16_gemm_rows, once per product and shared by every thread.
struct PackedActivations {
  Bf16Activations encoding = Bf16Activations::split;
  std::int64_t m = 0, cols = 0;
  std::int64_t row_words = 0; // 32-bit words (one bf16 pair each) per row, zero-padded to a multiple of 16
  std::vector<std::uint32_t> words;
};

bool bf16_gemm_supported();

PackedActivations pack_activations(const float* x, std::int64_t m, std::int64_t cols, Bf16Activations encoding);

// Rows r ∈ [r0, r1) of y's columns; W is BF16 row-major [rows, cols] with cols == x.cols. r0 should be
// a multiple of 32 (a whole panel) for full speed.
void bf16_gemm_rows(const Bf16* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
                    std::int64_t ldy);

} // namespace optkit::runtime
