// The AVX-512 matrix products of prefill: y[i·ldy + r] = Σ_c W[r, c]·x[i, c] for many activation
// rows, blocked as BLAS kernels are (W packed into L1-resident panels per K block, register tiles
// of 6 activation rows × 64 W rows accumulating into y), on W's own storage type:
//  - BF16 W with AVX512_BF16 dot products (VDPBF16PS: fp32 accumulation of bf16 pair products),
//    never widened to fp32. The fp32 activations become BF16 pairs in one of two encodings:
//      bf16_rounded — each x rounded to nearest-even BF16, two k per product (llama.cpp's
//        numerics for BF16 weights, twice the products per instruction);
//      bf16_split — x = hi + lo with hi, lo BF16 and W's value paired with itself, one k per
//        product, so x keeps ~16 significant bits and results stay within ~1e-5 of fp32 (what
//        the runtime uses: prefill then agrees with fp32 decode and the fp32 reference).
//  - F32 W with AVX-512 FMA (f32).
// Chosen at run time: panel_gemm_supported() says whether this build and CPU can (x86-64 with
// AVX-512F, plus AVX512_BF16 for the BF16 products; not OPTKIT_PORTABLE_KERNELS, not
// OPTKIT_CPU_BASELINE=1). Elsewhere the runtime keeps OpenBLAS sgemm (BF16 widened first).
// Where the BF16 products run on the AVX-512 register tiles, a BF16 W is packed into its panels
// once, when the model loads (runtime/packed_panels.hpp), and every product then multiplies those.
#pragma once

#include "runtime/dot_rows.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace optkit::runtime {

enum class PanelProduct { bf16_rounded, bf16_split, f32 };

// How a product is multiplied:
//  - avx512: AVX-512 register tiles of VDPBF16PS (or FMAs for f32) over W packed into panels, one
//    activation word broadcast per row;
//  - amx: AMX tiles of TDPBF16PS (the same pair products, 16 x 16 outputs per instruction) over the
//    same packed panels, where the CPU has AMX-BF16 and Linux grants the tile state;
//  - f32_transposed (f32, 32 or more activation rows, at most a quarter of the last 32 padding):
//    W is not packed at all — each W value is broadcast from its own row against the activations
//    packed transposed (32 rows per pair of vectors), which saves the panel transposes that cost
//    as much as a sixth of the FMAs (128 x 8192 x 2048 on one core: 116-133 -> 133-163 GFLOP/s);
//  - avx512_packed (BF16): the avx512 register tiles over a W packed once into PackedPanels, so a
//    product only streams them: no transposes per product, and a thread's share of W is one
//    contiguous stream (on 2 Zen 5 cores at 128 x 8192 x 2048: rounded 620-720 -> 880 GFLOP/s,
//    split 375-400 -> 450; one activation row over the 128256 x 2048 LM head: 35 -> 46 GB/s
//    against the row-dot kernel). Split activations pair with W's own element pairs here: each
//    packed activation word p is followed by its low halves, two broadcasts per W word. The f32
//    product over packed BF16 panels widens W's pairs in registers and multiplies them with FMAs,
//    an fp32 product (decode's few rows in the fp32 activation mode, bound by streaming W). It
//    serves any number of activation rows, and a row's result does not depend on the rows beside
//    it.
// Results agree to fp32 rounding whichever kernel runs.
enum class PanelKernel { avx512, amx, f32_transposed, avx512_packed };

bool panel_gemm_supported(PanelProduct product);

// The fastest kernel this CPU has for `product` on `m` activation rows, or none
// (panel_gemm_supported is false).
std::optional<PanelKernel> panel_gemm_kernel(PanelProduct product, std::int64_t m = 128);

// What multiplies BF16 weights on this CPU, in words (doctor, perf_runtime): "amx_bf16 tiles"
// (prefill), "avx512_bf16, panels packed at load" (prefill and decode) or "widened sgemm".
const char* bf16_gemm_kernel_name();

// Whether a BF16 W multiplied with `product` should be packed into PackedPanels when it loads:
// the product runs on the AVX-512 register tiles (AVX512_BF16 without AMX).
bool panel_packing_preferred(PanelProduct product);

class PackedPanels;

// x [m, cols] encoded for panel_gemm_rows, once per product and shared by every thread.
// For f32_transposed the words are x transposed in blocks of 32 rows: word (b·cols + c)·32 + i is
// x[32b + i, c] (zero past row m), and row_words is cols. For avx512_packed with split
// activations, word 2p is the rounded pair p and word 2p + 1 the pair of what rounding left.
struct PackedActivations {
  PanelProduct product = PanelProduct::bf16_split;
  PanelKernel kernel = PanelKernel::avx512;
  std::int64_t m = 0, cols = 0;
  std::int64_t row_words = 0; // 32-bit words per row (a bf16 pair or an fp32 each), zero-padded
  std::vector<std::uint32_t> words;
};

// `kernel`: the one to pack for (default: panel_gemm_kernel(product, m)); tests pick each in turn.
PackedActivations pack_activations(const float* x, std::int64_t m, std::int64_t cols, PanelProduct product,
                                   std::optional<PanelKernel> kernel = std::nullopt);

// Rows r ∈ [r0, r1) of y's columns; W is row-major [rows, cols] with cols == x.cols, BF16 for the
// bf16 products and fp32 for f32. r0 should be a multiple of 64 (a whole panel) for full speed.
void panel_gemm_rows(const Bf16* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
                     std::int64_t ldy);
void panel_gemm_rows(const float* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
                     std::int64_t ldy);
// The same over W packed into panels, x packed for PanelKernel::avx512_packed; r0 must be a
// multiple of 64 and r1 one too, or W's last row.
void panel_gemm_rows(const PackedPanels& w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
                     std::int64_t ldy);

// Rows [0, rows) of a BF16 W [rows, cols] into PackedPanels' layout at `out` (rows rounded up to
// 64, times PackedPanels::words_for(cols) words). Only where panel_packing_preferred says so.
void pack_weight_panels(const Bf16* w, std::int64_t rows, std::int64_t cols, std::uint32_t* out);

} // namespace optkit::runtime
