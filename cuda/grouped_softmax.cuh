// The online softmax a GQA group's query heads run over cached positions, shared by the grouped
// decode-attention kernel (decode_attention.cu) and paged attention (paged_attention.cu): a cached
// position is spread over HeadDim / 8 lanes holding 8 elements each; scores are in base 2 (q
// carries scale · log2 e). Each lane group keeps a (max, sum, acc) state per head; the block's
// states are merged at the end, and the (max, sum) left behind are in natural units.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace optkit::cuda {

// One position's K (kf) and V (vf) elements of this lane into the states of the tile's g heads.
template <int HeadDim, int GroupTile>
__device__ __forceinline__ void
softmax_update(const float (&qr)[GroupTile][8], const float (&kf)[8], const float (&vf)[8], bool valid, int g,
               float (&m)[GroupTile], float (&l)[GroupTile], float (&acc)[GroupTile][8]) {
  constexpr int kLanes = HeadDim / 8;
#pragma unroll
  for (int j = 0; j < GroupTile; ++j) {
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      dot = fmaf(qr[j][e], kf[e], dot);
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1) // every lane runs it: the shuffles need the whole warp
      dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (valid && j < g) {
      const float m_new = fmaxf(m[j], dot);
      const float correction = exp2f(m[j] - m_new), weight = exp2f(dot - m_new);
      l[j] = l[j] * correction + weight;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        acc[j][e] = fmaf(acc[j][e], correction, weight * vf[e]);
      m[j] = m_new;
    }
  }
}

// Merges the block's kStates states of each of the tile's g heads through shared memory; thread
// t writes elements t, t + blockDim... Head j's partial goes to row (first_row + j) · splits +
// split of partial_acc [.., HeadDim] and partial_ml [.., 2].
template <int HeadDim, int GroupTile, int kStates>
__device__ __forceinline__ void
merge_states(const float (&m)[GroupTile], const float (&l)[GroupTile], const float (&acc)[GroupTile][8], int state,
             int part, int g, std::size_t first_row, int splits, int split, float* __restrict__ partial_acc,
             float* __restrict__ partial_ml) {
  __shared__ float s_m[kStates][GroupTile], s_l[kStates][GroupTile];
  __shared__ float s_acc[kStates][GroupTile][HeadDim];
#pragma unroll
  for (int j = 0; j < GroupTile; ++j) {
    if (part == 0) {
      s_m[state][j] = m[j];
      s_l[state][j] = l[j];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
      s_acc[state][j][part * 8 + e] = acc[j][e];
  }
  __syncthreads();
  for (int index = threadIdx.x; index < g * HeadDim; index += blockDim.x) {
    const int j = index / HeadDim, d = index % HeadDim;
    float top = -INFINITY;
    for (int st = 0; st < kStates; ++st)
      top = fmaxf(top, s_m[st][j]);
    float sum = 0.0f, out = 0.0f;
    for (int st = 0; st < kStates; ++st) {
      const float c = s_m[st][j] == -INFINITY ? 0.0f : exp2f(s_m[st][j] - top);
      sum += s_l[st][j] * c;
      out += s_acc[st][j][d] * c;
    }
    const std::size_t row = (first_row + j) * splits + split;
    partial_acc[row * HeadDim + d] = out;
    if (d == 0) {
      partial_ml[row * 2] = top == -INFINITY ? top : top * 0.6931471805599453f; // back to natural units
      partial_ml[row * 2 + 1] = sum;
    }
  }
}

} // namespace optkit::cuda
