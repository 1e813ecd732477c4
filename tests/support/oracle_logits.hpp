// The PyTorch reference logits committed beside each test model (oracle_logits.safetensors,
// written by testdata/models/tools/hf_reference.py): prompts and their logits at every position.
#pragma once

#include "model/safetensors.hpp"
#include "runtime/language_model.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <vector>

namespace optkit::test {

struct OraclePrompt {
  std::vector<runtime::TokenId> ids;
  std::vector<float> logits; // [ids.size(), vocab]
};

// `file_name`: oracle_logits_bf16_activations.safetensors holds the same prompts' logits with every
// linear layer's input rounded to bf16 (the BF16-stored models only).
inline std::vector<OraclePrompt>
read_oracle(const std::filesystem::path& model_dir, const char* file_name = "oracle_logits.safetensors") {
  model::SafetensorsFile file(model_dir / file_name);
  std::vector<OraclePrompt> prompts;
  for (int i = 0;; ++i) {
    const auto ids = file.find(fmt::format("prompt.{}.ids", i));
    const auto logits = file.find(fmt::format("prompt.{}.logits", i));
    if (!ids.info)
      break;
    OraclePrompt p;
    for (std::size_t k = 0; k < ids.element_count(); ++k)
      p.ids.push_back(static_cast<runtime::TokenId>(ids.at(k)));
    for (std::size_t k = 0; k < logits.element_count(); ++k)
      p.logits.push_back(logits.at(k));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

} // namespace optkit::test
