// What is done to a row of logits before a token is sampled from it, in vLLM's order: OpenAI's
// logit bias, then the repetition penalties (sampler.hpp), then the tokens that may not come yet
// (EOS and stop tokens before min_tokens) masked out. The logprobs a server reports are the raw
// row's; only sampling sees the processed one.
#pragma once

#include "runtime/sampler.hpp"

#include <span>
#include <utility>
#include <vector>

namespace optkit::runtime {

struct LogitsRules {
  std::span<const std::pair<TokenId, float>> logit_bias; // added to those tokens' logits
  Penalties penalties;
  std::span<const TokenId> prompt, output; // what the penalties count
  std::vector<TokenId> forbidden;          // tokens that may not be sampled now
};

class LogitsProcessor {
public:
  // The row to sample from: `row` itself when no rule applies, else the processed copy (held
  // here until the next call).
  std::span<const float> process(std::span<const float> row, const LogitsRules& rules);

private:
  std::vector<float> m_processed;
};

} // namespace optkit::runtime
