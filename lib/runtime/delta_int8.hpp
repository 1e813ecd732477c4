// The Δ product on the packed form in integers (DeltaZip's Δ kernel on a CPU's integer units): a
// 2:4 sparse 4-bit Δ (the decoder layers') or a dense 4-bit one (the embeddings' and LM head's,
// rounded) times activation rows quantized to int8 per row, as the W8A8 path quantizes
// them (runtime/int8_gemm.hpp: x ≈ q·s, q = round-half-even(x / s), s = max|x| / 127). Per 128
// columns of a Δ row: the 64 kept codes are widened from nibbles to bytes in registers, the 2:4
// positions expanded into a byte permutation that gathers the 64 activations they multiply
// (AVX512_VBMI: VPERMB, VPMULTISHIFTQB, VPERMI2B; AVX2: VPSHUFB within 128-bit lanes), and the
// products are summed exactly in int32 (AVX512_VNNI: VPDPBUSD; AVX2: VPMADDUBSW, VPMADDWD); each
// group's scale is applied once per group. The result equals the float path on x̂ = q·s to fp32
// rounding: exact within the activation quantization. Never decoded to floats, so a decode step
// reads the Δ's packed bytes once (about 1/5 of a BF16 matrix's with its indices and scales).
// Where the CPU lacks both AVX2 and AVX512_VNNI + AVX512_VBMI (or OPTKIT_CPU_BASELINE=1, or a
// portable build), or the Δ has another shape, delta_int8_supported() is false and the float
// path runs.
#pragma once

#include "runtime/delta_decode.hpp"
#include "runtime/int8_gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace optkit::runtime {

// The integer kernels, fastest first.
enum class DeltaInt8Kernel { avx512_vbmi, avx2 };

inline const char*
to_string(DeltaInt8Kernel kernel) {
  return kernel == DeltaInt8Kernel::avx512_vbmi ? "avx512_vnni + avx512_vbmi" : "avx2";
}

// The kernels this CPU runs, fastest first: none where the float path runs (not x86-64 with AVX2,
// OPTKIT_CPU_BASELINE=1, or a portable build).
std::vector<DeltaInt8Kernel> delta_int8_kernels();

// Whether this CPU runs an integer kernel.
bool delta_int8_cpu();

// Whether the integer kernel takes `codes`: 4-bit, 2:4 sparse or dense, columns and scale groups
// multiples of 128, offset 0 or ½, and for 2:4 (`distinct_pairs`) no nibble naming one column
// twice, which the reference decode resolves by keeping the second value and a gather would add
// twice.
bool delta_int8_supported(const DeltaCodes& codes, bool distinct_pairs);

// Whether every kept-position nibble of the Δ names two different columns.
bool delta_pairs_distinct(const DeltaCodes& codes, std::int64_t rows);

// The kernel's constant per Δ row, made once when a Δ is loaded: Σ_g scale_g·(−128·Σw) over the
// scale groups g and their codes w. The kernel multiplies u = q + 128 (unsigned) by w, exactly in
// int32 per group; adding this row's offset in fp32 takes the 128·Σw back out.
std::vector<float> delta_int8_row_offsets(const DeltaCodes& codes, std::int64_t rows);

// How many Δ rows a pool thread takes at a time in a product over `rows` rows (the `chunk` of
// ThreadPool::parallel_for): an eighth of its equal share, so a thread slowed by something else on
// the machine takes fewer, as the base's decode product splits its rows; at least 64, since each
// call lays the activation rows out anew for its kernel.
inline std::int64_t
delta_int8_task_rows(std::int64_t rows, unsigned threads) {
  return std::max<std::int64_t>(64, rows / (8 * static_cast<std::int64_t>(threads)));
}

// y[i·ldy + r] += Σ_c x̂[i, c] · Δ[r, c] for Δ rows [r0, r1) and every row i of x (x quantized per
// row by quantize_activations_u8). delta_int8_supported(codes, ...) must hold; `row_offsets`
// are delta_int8_row_offsets(codes, rows) (at least r1 of them). Runs the fastest kernel.
void delta_int8_rows(const DeltaCodes& codes, std::span<const float> row_offsets, std::int64_t r0, std::int64_t r1,
                     const QuantizedActivations& x, float* y, std::int64_t ldy);

// The same on `kernel` (one of delta_int8_kernels(), else RuntimeFailure): what tests and benchmarks
// compare.
void delta_int8_rows(DeltaInt8Kernel kernel, const DeltaCodes& codes, std::span<const float> row_offsets,
                     std::int64_t r0, std::int64_t r1, const QuantizedActivations& x, float* y, std::int64_t ldy);

} // namespace optkit::runtime
