// A GGUF matrix behind the runtime's LinearWeight interface: ggml-typed rows (F32, F16, BF16,
// Q8_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) viewed in place in the mapped file and dequantized to fp32
// a block of rows at a time as they are used (quant/ggml_blocks.hpp); a Q or K projection's rows
// read through llama.cpp's RoPE permutation, so the runtime sees HF row order. Its inputs are rounded
// as llama.cpp's CPU kernels round them (8-bit blocks for quantized weights), so a GGUF's
// perplexity and tokens here are llama.cpp's (the decoder keeps its KV cache in fp16 too).
#pragma once

#include "model/weight_store.hpp"
#include "runtime/linear_weight.hpp"

#include <memory>

namespace optkit::runtime {

std::unique_ptr<LinearWeight> make_ggml_weight(const model::GgufMatrix& matrix);

} // namespace optkit::runtime
