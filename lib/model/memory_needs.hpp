// What a layer-by-layer compression holds in memory at its peak, part by part, from the model's
// shapes and the calibration set's size alone: what `compress --max-memory` is checked against
// before anything runs, and what `doctor --model` prints. The parts (bytes):
//  - process: the program, the tokenizer, thread stacks and BLAS buffers (a fixed allowance);
//  - layer: the largest decoder layer's working set: its mapped weights, and for its largest linear
//    the fp32 weight, grid values, reconstruction and encoded output; calibrated, also the layer's
//    reconstructions (the next layer's inputs come from them), its Hessians, and GPTQ's copies of
//    the largest Hessian (the factorization and the permuted copy);
//  - states: the calibration set's hidden states between layers (tokens × hidden × 4), unless they
//    spill to a scratch file, when only the chunk's own pages are resident;
//  - chunk: one chunk of whole sequences through a layer: its states, the norm, q/k/v, attention,
//    projection, gate and up outputs and the chunk's K/V cache.
#pragma once

#include "model/model_config.hpp"

#include <cstdint>
#include <string>

namespace optkit::model {

struct CompressWork {
  std::uint64_t weight_bytes = 2;      // bytes per stored weight element (BF16/F16 2, F32 4)
  std::int64_t calibration_tokens = 0; // 0: uncalibrated (RTN, FP8)
  std::int64_t chunk_tokens = 8192;    // tokens run through a layer at once
  bool hessians = false;               // GPTQ / SparseGPT (else calibration collects statistics only)
  bool delta = false;                  // compress delta: the base's layer is mapped and widened too
};

struct CompressMemoryNeeds {
  std::uint64_t process = 0, layer = 0, states = 0, chunk = 0;

  std::uint64_t total(bool spilled) const { return process + layer + chunk + (spilled ? 0 : states); }
  // "5.1 GB: 1.6 GB for the largest layer, 3.5 GB of calibration states, 0.4 GB for a chunk of
  // up to 8192 tokens, 134 MB for the process" (the states left out when spilled).
  std::string describe(bool spilled, std::int64_t chunk_tokens) const;
};

CompressMemoryNeeds compress_memory_needs(const ModelConfig& config, const CompressWork& work);

// "1.62 GB", "27 MB", "12 kB" (decimal, as disks and `free --si` count).
std::string gigabytes(std::uint64_t bytes);

} // namespace optkit::model
