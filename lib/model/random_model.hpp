// Random-weight models of real shapes, for speed tests: the published configs of
// Llama-3.2-1B, Llama-3.1-8B and Qwen3-30B-A3B (no download needed), written as a Hugging Face folder;
// and random fine-tunes of such a model (a base plus a low-rank and a dense perturbation), the
// variants DeltaZip serves.
#pragma once

#include "model/dtype.hpp"

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace optkit::model {

// "llama-3.2-1b", "llama-3.1-8b" or "qwen3-30b-a3b"; InputError naming the choices otherwise.
nlohmann::json preset_model_config(const std::string& name);

// Writes config.json and safetensors (sharded at 4 GiB) with N(0, 0.02²)-like weights and unit
// norms in `dtype` (F32, BF16 or F16). Deterministic for a seed.
void write_random_model(const std::filesystem::path& dir, const nlohmann::json& config, DType dtype,
                        std::uint64_t seed);

// How a random fine-tune moves each matrix W (out x in): W + A B + E, A (out x rank) and B
// (rank x in) with N(0, 1) entries scaled so that A B's entries have RMS `low_rank_rms`, and E
// N(0, noise_rms^2): a fine-tune's Δ is low-rank plus small everywhere (DeltaZip §2). Vectors
// (norms, biases) are copied as they are.
struct FinetunePerturbation {
  std::int64_t rank = 16;
  float low_rank_rms = 1e-3f;
  float noise_rms = 5e-4f;
};

// Writes `out_dir`: `base_dir`'s config.json and every tensor, each 2-D one perturbed as
// `perturbation` says, in the tensor's own dtype (F32, BF16 or F16), a block of rows at a time
// (memory: one block, not the model). Deterministic for a seed. InputError for a GGUF base or a
// matrix in another dtype.
void write_random_finetune(const std::filesystem::path& base_dir, const std::filesystem::path& out_dir,
                           const FinetunePerturbation& perturbation, std::uint64_t seed);

} // namespace optkit::model
