// The causal softmax between prefill attention's two batched products (scores = K·Qᵀ, then V·P).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace optkit::cuda {

// In place over `rows` rows of S (row-major BF16, `seq` columns); row r is query position
// r % seq and attends to columns 0..r % seq, the rest become 0. One block of 256 threads per row.
void launch_causal_softmax(__nv_bfloat16* s, std::int64_t rows, int seq, cudaStream_t stream);

} // namespace optkit::cuda
