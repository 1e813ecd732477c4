#include "prefill_softmax.cuh"

#include <cmath>

namespace optkit::cuda {
namespace {

using bf16 = __nv_bfloat16;

__global__ void
causal_softmax(bf16* s, std::int64_t rows, int seq) {
  const std::int64_t row = blockIdx.x;
  if (row >= rows)
    return;
  bf16* r = s + row * seq;
  const int last = static_cast<int>(row % seq); // attends to columns 0..last
  __shared__ float reduce[32];
  float m = -INFINITY;
  for (int c = threadIdx.x; c <= last; c += blockDim.x)
    m = fmaxf(m, __bfloat162float(r[c]));
  for (int o = 16; o > 0; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0)
    reduce[threadIdx.x / 32] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < int(blockDim.x / 32); ++w)
    m = fmaxf(m, reduce[w]);
  __syncthreads();
  float sum = 0.0f;
  for (int c = threadIdx.x; c <= last; c += blockDim.x)
    sum += __expf(__bfloat162float(r[c]) - m);
  for (int o = 16; o > 0; o >>= 1)
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0)
    reduce[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = 0.0f;
  for (int w = 0; w < int(blockDim.x / 32); ++w)
    sum += reduce[w];
  const float inv = 1.0f / sum;
  for (int c = threadIdx.x; c < seq; c += blockDim.x)
    r[c] = __float2bfloat16(c <= last ? __expf(__bfloat162float(r[c]) - m) * inv : 0.0f);
}

} // namespace

void
launch_causal_softmax(__nv_bfloat16* s, std::int64_t rows, int seq, cudaStream_t stream) {
  causal_softmax<<<static_cast<unsigned>(rows), 256, 0, stream>>>(s, rows, seq);
}

} // namespace optkit::cuda
