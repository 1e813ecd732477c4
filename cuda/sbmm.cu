#include "sbmm.cuh"

#include "check.cuh"

#include <algorithm>
#include <string>

namespace optkit::cuda {
namespace {

constexpr int kWarps = 8, kRowsPerWarp = 4, kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kChunkCols = 1024; // x columns staged per round (a multiple of every word's span)
constexpr int kChunkPitch = kChunkCols + kChunkCols / 32; // one float of skew per 32: lanes' columns spread over banks

__device__ __forceinline__ int
skewed(int column) {
  return column + column / 32;
}

// Code `index` of a packed word, as a value on the grid before scaling.
template <int Bits>
__device__ __forceinline__ float
grid_value(std::uint32_t word, int index, float offset) {
  constexpr std::uint32_t kMask = (1u << Bits) - 1u;
  constexpr int kBias = 1 << (Bits - 1);
  return static_cast<float>(static_cast<int>((word >> (Bits * index)) & kMask) - kBias) + offset;
}

// One block: kRowsPerBlock rows of Δ against the tile's rows of x, TileRows (1, 2, 4 or 8) of them
// staged and multiplied, so a decode tile of one or two rows does an eighth or a quarter of a full
// tile's work. Lanes take consecutive packed words, so the loads of values and indices are
// coalesced; each lane decodes its word's values and multiplies them with the staged x columns
// they fall on.
template <int Bits, bool Sparse, int TileRows>
__device__ void
sbmm_block(const float* __restrict__ x, float* __restrict__ y, int rows, int cols, const SbmmDelta& d,
           const SbmmTile& t, float (*xs)[kChunkPitch]) {
  constexpr int kPerWord = 32 / Bits;                            // codes per word
  constexpr int kColsPerWord = Sparse ? 2 * kPerWord : kPerWord; // columns one word covers
  constexpr int kWordsPerChunk = kChunkCols / kColsPerWord;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first_row = blockIdx.x * kRowsPerBlock + warp * kRowsPerWarp;
  // One scale per word when groups never split a word's columns (group 128 and the like).
  const bool word_scale = d.group_size % kColsPerWord == 0;
  float acc[kRowsPerWarp][TileRows] = {};

  for (int c0 = 0; c0 < cols; c0 += kChunkCols) {
    __syncthreads();
    for (int i = threadIdx.x; i < TileRows * kChunkCols; i += blockDim.x) {
      const int r = i / kChunkCols, c = i % kChunkCols;
      xs[r][skewed(c)] = r < t.count && c0 + c < cols ? x[std::size_t(t.row + r) * cols + c0 + c] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int row = first_row + rr;
      if (row >= rows)
        break;
      const std::int32_t* words = d.values + std::size_t(row) * d.words;
      const float* scales = d.scales + std::size_t(row) * d.groups;
      for (int w = lane; w < kWordsPerChunk; w += 32) {
        const int word_index = c0 / kColsPerWord + w;
        const int first_col = word_index * kColsPerWord;
        if (first_col >= cols)
          break;
        const auto word = static_cast<std::uint32_t>(__ldg(words + word_index));
        const float s_word = word_scale ? __ldg(scales + first_col / d.group_size) : 0.0f;
        if constexpr (Sparse) {
          constexpr int kGroups = kColsPerWord / 4; // groups of four columns per word (2, 4 or 8)
          const std::uint8_t* index_bytes = d.indices + std::size_t(row) * (cols / 8) + first_col / 8;
          std::uint32_t nibbles = 0;
#pragma unroll
          for (int b = 0; b < kGroups / 2; ++b)
            if (first_col + 8 * b < cols) // a row's last word may reach past its index bytes
              nibbles |= static_cast<std::uint32_t>(__ldg(index_bytes + b)) << (8 * b);
#pragma unroll
          for (int q = 0; q < kGroups; ++q) {
            const int g0 = first_col + 4 * q;
            if (g0 >= cols)
              break;
            const std::uint32_t nibble = (nibbles >> (4 * q)) & 0xfu;
            const int ca = g0 + static_cast<int>(nibble & 3u), cb = g0 + static_cast<int>(nibble >> 2);
            const float sa = word_scale ? s_word : __ldg(scales + ca / d.group_size);
            const float sb = word_scale ? s_word : __ldg(scales + cb / d.group_size);
            const float va = grid_value<Bits>(word, 2 * q, d.offset) * sa;
            const float vb = grid_value<Bits>(word, 2 * q + 1, d.offset) * sb;
            const int la = skewed(ca - c0), lb = skewed(cb - c0);
#pragma unroll
            for (int i = 0; i < TileRows; ++i)
              acc[rr][i] = fmaf(va, xs[i][la], fmaf(vb, xs[i][lb], acc[rr][i]));
          }
        } else {
#pragma unroll
          for (int q = 0; q < kPerWord; ++q) {
            const int c = first_col + q;
            if (c >= cols)
              break;
            const float value =
                grid_value<Bits>(word, q, d.offset) * (word_scale ? s_word : __ldg(scales + c / d.group_size));
            const int lc = skewed(c - c0);
#pragma unroll
            for (int i = 0; i < TileRows; ++i)
              acc[rr][i] = fmaf(value, xs[i][lc], acc[rr][i]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int row = first_row + rr;
#pragma unroll
    for (int i = 0; i < TileRows; ++i) {
      float sum = acc[rr][i];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if (lane == i && i < t.count && row < rows)
        y[std::size_t(t.row + i) * rows + row] += sum;
    }
  }
}

template <int Bits, bool Sparse>
__device__ void
sbmm_rows(int tile_rows, const float* x, float* y, int rows, int cols, const SbmmDelta& d, const SbmmTile& t,
          float (*xs)[kChunkPitch]) {
  switch (tile_rows) {
  case 1:
    sbmm_block<Bits, Sparse, 1>(x, y, rows, cols, d, t, xs);
    break;
  case 2:
    sbmm_block<Bits, Sparse, 2>(x, y, rows, cols, d, t, xs);
    break;
  case 4:
    sbmm_block<Bits, Sparse, 4>(x, y, rows, cols, d, t, xs);
    break;
  default:
    sbmm_block<Bits, Sparse, 8>(x, y, rows, cols, d, t, xs);
    break;
  }
}

__global__ void
__launch_bounds__(32 * kWarps) sbmm_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                                           const SbmmDelta* __restrict__ deltas, const SbmmTile* __restrict__ tiles) {
  __shared__ float xs[kSbmmTileRows][kChunkPitch];
  const SbmmTile t = tiles[blockIdx.y];
  const SbmmDelta d = deltas[t.delta];
  // Uniform over the block: every thread takes the same instantiation.
  const int tile_rows = t.count <= 1 ? 1 : t.count <= 2 ? 2 : t.count <= 4 ? 4 : 8;
  switch (d.bits * 2 + (d.sparse ? 1 : 0)) {
  case 2 * 2 + 1:
    sbmm_rows<2, true>(tile_rows, x, y, rows, cols, d, t, xs);
    break;
  case 4 * 2 + 1:
    sbmm_rows<4, true>(tile_rows, x, y, rows, cols, d, t, xs);
    break;
  case 8 * 2 + 1:
    sbmm_rows<8, true>(tile_rows, x, y, rows, cols, d, t, xs);
    break;
  case 2 * 2:
    sbmm_rows<2, false>(tile_rows, x, y, rows, cols, d, t, xs);
    break;
  case 4 * 2:
    sbmm_rows<4, false>(tile_rows, x, y, rows, cols, d, t, xs);
    break;
  case 8 * 2:
    sbmm_rows<8, false>(tile_rows, x, y, rows, cols, d, t, xs);
    break;
  default:
    break; // refused on the host (sbmm_supports)
  }
}

// Thread per column of one row: the dense value of Δ[row, column].
__global__ void
decode_delta_kernel(SbmmDelta d, int rows, int cols, float* __restrict__ out) {
  const int row = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x; // rows on x: a vocabulary passes 65535
  if (row >= rows || c >= cols)
    return;
  const int per_word = 32 / d.bits, bias = 1 << (d.bits - 1);
  const std::uint32_t mask = (1u << d.bits) - 1u;
  const std::int32_t* words = d.values + std::size_t(row) * d.words;
  const float scale = d.scales[std::size_t(row) * d.groups + c / d.group_size];
  const auto code = [&](int k) { // as a signed grid value: the unsigned code minus 2^(bits-1)
    const auto word = static_cast<std::uint32_t>(words[k / per_word]);
    return static_cast<float>(static_cast<int>((word >> (d.bits * (k % per_word))) & mask) - bias) + d.offset;
  };
  float value = 0.0f;
  if (d.sparse) {
    const int g = c / 4;
    const unsigned nibble = (d.indices[std::size_t(row) * (cols / 8) + g / 2] >> ((g & 1) * 4)) & 0xfu;
    if (c % 4 == static_cast<int>(nibble & 3u))
      value = code(2 * g);
    else if (c % 4 == static_cast<int>(nibble >> 2))
      value = code(2 * g + 1);
  } else {
    value = code(c);
  }
  out[std::size_t(row) * cols + c] = value * scale;
}

} // namespace

void
append_sbmm_tiles(int row, int count, int delta, std::vector<SbmmTile>& tiles) {
  for (int r = 0; r < count; r += kSbmmTileRows)
    tiles.push_back({row + r, std::min(kSbmmTileRows, count - r), delta});
}

bool
sbmm_supports(const SbmmDelta& delta, int cols) {
  return (delta.bits == 2 || delta.bits == 4 || delta.bits == 8) && cols % 8 == 0 && delta.group_size >= 1;
}

void
launch_sbmm(const float* x, float* y, int rows, int cols, const SbmmDelta* deltas, const SbmmTile* tiles,
            int tile_count, cudaStream_t stream) {
  if (tile_count == 0 || rows == 0)
    return;
  if (tile_count > 65535) // the grid's y dimension: 65535 tiles of 8 rows, far past a step's rows
    throw std::runtime_error("SBMM over " + std::to_string(tile_count) + " tiles: at most 65535 in one launch");
  const dim3 grid(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), static_cast<unsigned>(tile_count));
  sbmm_kernel<<<grid, 32 * kWarps, 0, stream>>>(x, y, rows, cols, deltas, tiles);
  check(cudaGetLastError(), "SBMM launch");
}

void
launch_decode_delta(const SbmmDelta& delta, int rows, int cols, float* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((cols + 255) / 256));
  decode_delta_kernel<<<grid, 256, 0, stream>>>(delta, rows, cols, out);
  check(cudaGetLastError(), "Δ decode launch");
}

} // namespace optkit::cuda
