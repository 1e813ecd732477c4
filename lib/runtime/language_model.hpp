// What a runnable causal language model offers the rest of optkit (eval, compress calibration,
// serve-deltas). The CPU transformer implements it; a CUDA backend implements the same calls.
#pragma once

#include "model/model_config.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace optkit::runtime {

using SequenceId = std::int32_t;
using TokenId = std::int32_t;

// Tokens to append to one sequence in a forward pass: a prompt chunk (prefill) or one token
// (decode). Sequences of different lengths and phases go through one call together.
struct SequenceInput {
  SequenceId sequence = 0;
  std::span<const TokenId> tokens;
  bool all_logits = false;   // logits for every position of `tokens`, not only the last
  std::int32_t variant = -1; // a served variant of the model (see CpuTransformer::add_variant); -1: the base
};

class LanguageModel {
public:
  virtual ~LanguageModel() = default;
  virtual const model::ModelConfig& config() const = 0;
  // A new empty sequence (its KV cache starts empty).
  virtual SequenceId add_sequence() = 0;
  virtual void remove_sequence(SequenceId sequence) = 0;
  virtual std::int64_t sequence_length(SequenceId sequence) const = 0;
  // Gives a new, empty sequence the keys and values its first tokens would get, when a model with
  // prefix caching holds them from an earlier sequence of the same tokens and variant, and returns
  // how many tokens that covers (fewer than tokens.size(): at least the last is computed); the
  // sequence's length is then that. 0 for a model without prefix caching.
  virtual std::int64_t reuse_prefix(SequenceId, std::span<const TokenId>, std::int32_t /*variant*/) { return 0; }
  // Appends each input's tokens to its sequence and returns fp32 logits, vocab_size per row: for
  // each input in order, one row per token when all_logits, else one row for its last token.
  virtual std::vector<float> forward(std::span<const SequenceInput> inputs) = 0;
};

} // namespace optkit::runtime
