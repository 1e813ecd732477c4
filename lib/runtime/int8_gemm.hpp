// W8A8 products in integers, as the compressed-tensors int8 scheme defines them: weights int8 with
// one scale per output row (channel strategy), activations quantized on the fly to int8 per token
// (or per tensor), symmetric: x ≈ q·s with s = max|x| / 127 and q = round-half-even(x / s),
// exactly quant::fake_quantize_activations' grid. Then
//   y[i, r] = s_x[i] · s_w[r] · Σ_c q_x[i, c] · q_w[r, c]
// with the sum exact in int32. On x86-64 with AVX512_VNNI the sum is VPDPBUSD (u8 × s8 → s32, 64
// products per instruction): activations are stored as q + 128 (unsigned) and 128 · Σ_c q_w[r, c]
// is taken off each row's sum. int8_gemm_supported() says whether this build and CPU have it
// (not OPTKIT_PORTABLE_KERNELS, not OPTKIT_CPU_BASELINE=1); elsewhere the runtime keeps the
// float path (activations fake-quantized, weights widened, sgemm), which agrees to fp32 rounding.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace optkit::runtime {

bool int8_gemm_supported();

// x [m, cols] quantized per row (per_tensor: one scale for all rows) and offset to unsigned.
struct QuantizedActivations {
  std::int64_t m = 0, cols = 0;
  std::int64_t pitch = 0;      // bytes per row, cols rounded up to 64 (zero-padded)
  std::vector<std::uint8_t> u; // q + 128
  std::vector<float> scale;    // s_x per row (0 for an all-zero row)
};

// On any x86-64 CPU (AVX-512 where int8_gemm_supported(), else the same grid in scalar code, which
// the AVX2 Δ kernel reads); portable builds throw.
QuantizedActivations quantize_activations_u8(const float* x, std::int64_t m, std::int64_t cols, bool per_tensor);

// 128 · Σ_c q_w[r, c] for each row of W [rows, cols]: the offset VPDPBUSD's unsigned operand adds.
std::vector<std::int32_t> int8_row_offsets(const std::int8_t* w, std::int64_t rows, std::int64_t cols);

// y[i·ldy + r] for W rows r ∈ [r0, r1) and every activation row i.
void int8_gemm_rows(const std::int8_t* w, std::int64_t cols, std::int64_t r0, std::int64_t r1,
                    std::span<const std::int32_t> row_offsets, std::span<const float> w_scales,
                    const QuantizedActivations& x, float* y, std::int64_t ldy);

} // namespace optkit::runtime
