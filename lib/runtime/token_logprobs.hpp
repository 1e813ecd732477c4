// Log-probabilities of tokens under one row of logits, as OpenAI's `logprobs` report them: the
// chosen token's and the n most likely, from the model's raw distribution (before temperature,
// top-k/top-p or min_tokens suppression — vLLM's default "raw_logprobs" mode).
#pragma once

#include "runtime/language_model.hpp"

#include <span>
#include <vector>

namespace optkit::runtime {

struct TokenLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
};

struct PositionLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top; // most likely first; ties by lower id
};

// log_softmax(logits)[chosen] and the `top_n` largest entries (top_n ≥ 0, at most the vocabulary).
PositionLogprobs position_logprobs(std::span<const float> logits, TokenId chosen, int top_n);

} // namespace optkit::runtime
