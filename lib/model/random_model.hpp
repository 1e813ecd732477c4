// Random-weight models of real shapes, for speed tests: the published configs of
// Llama-3.2-1B, Llama-3.1-8B and Qwen3-30B-A3B (no download needed), written as a Hugging Face folder.
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
std::vector<std::string> preset_model_names();

// Writes config.json and safetensors (sharded at 4 GiB) with N(0, 0.02²)-like weights and unit
// norms in `dtype` (F32, BF16 or F16). Deterministic for a seed.
void write_random_model(const std::filesystem::path& dir, const nlohmann::json& config, DType dtype,
                        std::uint64_t seed);

} // namespace optkit::model
