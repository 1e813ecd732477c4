// SBMM (DeltaZip §5.2): y[rows of a segment] += x[segment] · Δᵀ for every variant's segment of a
// batch in one kernel launch, each Δ read in its packed form (2:4 sparse or dense, 2/4/8-bit,
// per-group scales, as `optkit compress delta` writes it) and decoded in registers — never as a
// dense matrix. Variants of different bit widths share the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace optkit::cuda {

// One variant's Δ of one matrix [rows, cols], in device memory.
struct SbmmDelta {
  const std::int32_t* values = nullptr;  // [rows, words]: packed unsigned codes, value k at bits·(k % (32/bits))
  const std::uint8_t* indices = nullptr; // [rows, cols/8] when sparse: a nibble of kept positions per 4 columns
  const float* scales = nullptr;         // [rows, groups]
  int words = 0, groups = 0, group_size = 0, bits = 0;
  int sparse = 1;
  float offset = 0; // added to (code − 2^(bits−1)) before scaling: ½ on a mid-rise grid
};

// Batch rows [row, row + count) use delta `delta`; count ≤ kSbmmTileRows.
struct SbmmTile {
  int row = 0, count = 0, delta = 0;
};
constexpr int kSbmmTileRows = 8;

// Appends the tiles of batch rows [row, row + count) of delta `delta`.
void append_sbmm_tiles(int row, int count, int delta, std::vector<SbmmTile>& tiles);

// Whether the kernel takes this Δ: bits 2, 4 or 8, cols a multiple of 8, group_size ≥ 1.
bool sbmm_supports(const SbmmDelta& delta, int cols);

// x: [m, cols] fp32; y: [m, rows] fp32, accumulated into; deltas and tiles in device memory.
void launch_sbmm(const float* x, float* y, int rows, int cols, const SbmmDelta* deltas, const SbmmTile* tiles,
                 int tile_count, cudaStream_t stream);

// The dense fp32 Δ [rows, cols] of one variant (the per-delta baseline SBMM is measured against).
void launch_decode_delta(const SbmmDelta& delta, int rows, int cols, float* out, cudaStream_t stream);

} // namespace optkit::cuda
