// What a layer-by-layer compression holds in memory at its peak, from the model's shapes and the
// calibration set's size alone: what `compress --max-memory` is checked against before anything
// runs, and what `doctor --model` prints. A layer is worked on in two phases, and the larger sets
// the peak (bytes):
//  - calibration pass: the layer's mapped weights, the Hessians (GPTQ) of its four inputs as they
//    accumulate, and one chunk of whole sequences through it (its states, the norm, q/k/v,
//    attention, projection and gate outputs, the chunk's K/V cache; the up output and the down
//    projection's packed input for one block of the MLP's rows);
//  - compressing its largest linear: the reconstructions of the linears before it (the next
//    layer's inputs come from them), and for that linear its mapped weights (each linear's pages
//    are released once it is widened), the fp32 weight, the grid values and reconstruction,
//    GPTQ's working copy (then the error report's two), and its Hessian, which GPTQ factors in
//    place;
// beside them the calibration set's hidden states between layers (tokens × hidden × 4) unless they
// spill to a scratch file, and a measured allowance for the process (code, stacks, BLAS buffers;
// calibrated, the tokenizer and the tokenized documents).
#pragma once

#include "model/model_config.hpp"

#include <cstdint>
#include <string>

namespace optkit::model {

struct CompressWork {
  std::uint64_t weight_bytes = 2;       // bytes per stored weight element (BF16/F16 2, F32 4)
  std::int64_t calibration_tokens = 0;  // 0: uncalibrated (RTN, FP8)
  std::int64_t chunk_tokens = 8192;     // tokens run through a layer at once
  std::int64_t mlp_block_tokens = 2048; // rows the MLP multiplies at once
  bool hessians = false;                // GPTQ / SparseGPT (else calibration collects statistics only)
  bool delta = false;                   // compress delta: the base's layer is mapped and widened too
};

struct CompressMemoryNeeds {
  std::uint64_t process = 0, calibration_pass = 0, compression = 0, states = 0;
  std::int64_t chunk_tokens = 0; // 0: uncalibrated (no calibration pass)

  std::uint64_t layer() const { return calibration_pass > compression ? calibration_pass : compression; }
  std::uint64_t total(bool spilled) const { return process + layer() + (spilled ? 0 : states); }
  // "5.10 GB: 1.60 GB for a layer (its calibration pass over chunks of up to 8192 tokens), 3.50 GB
  // of calibration states, 134 MB for the process" (the states left out when spilled).
  std::string describe(bool spilled) const;
};

CompressMemoryNeeds compress_memory_needs(const ModelConfig& config, const CompressWork& work);

// What running a model holds (eval, serve-deltas): its weights mapped and all touched (file pages
// count in the resident set), the activations of one step of `step_tokens` rows (hidden states,
// q/k/v, the MLP's gate and up, the logits), the KV cache, and the process allowance.
struct RunMemoryNeeds {
  std::uint64_t process = 0, weights = 0, activations = 0, kv_cache = 0;

  std::uint64_t total() const { return process + weights + activations + kv_cache; }
  // "17.2 GB: 16.1 GB of weights, 262 MB of KV cache, 810 MB of activations, 134 MB for the process"
  std::string describe() const;
};

// `weight_bytes`: the safetensors bytes mapped (every model the command loads); `kv_bytes`: the KV
// cache's budget.
RunMemoryNeeds run_memory_needs(const ModelConfig& config, std::uint64_t weight_bytes, std::int64_t step_tokens,
                                std::uint64_t kv_bytes);

// "1.62 GB", "27 MB", "12 kB" (decimal, as disks and `free --si` count).
std::string gigabytes(std::uint64_t bytes);

} // namespace optkit::model
