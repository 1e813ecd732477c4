// Picks the next token from a row of logits: greedy (temperature 0), or seeded sampling with
// temperature, then min-p, top-k and top-p (nucleus) filtering, in vLLM's order.
#pragma once

#include "runtime/language_model.hpp"

#include <cstdint>
#include <random>
#include <span>

namespace optkit::runtime {

struct SamplingParams {
  float temperature = 0.0f; // 0: greedy
  std::int64_t top_k = 0;   // 0: all tokens
  float top_p = 1.0f;       // 1: no nucleus cut
  std::uint64_t seed = 0;
  float min_p = 0.0f; // drop tokens below min_p × the most likely token's probability
};

class Sampler {
public:
  explicit Sampler(SamplingParams params);
  TokenId next(std::span<const float> logits);

private:
  SamplingParams m_params;
  std::mt19937_64 m_rng;
};

// Index of the largest logit (lowest index on ties).
TokenId argmax(std::span<const float> logits);

// OpenAI's and vLLM's penalties on a row of logits, before sampling: a token the output holds
// loses `presence` once and `frequency` per occurrence; a token in the prompt or the output has
// a positive logit divided by `repetition` and a negative one multiplied by it (CTRL's penalty,
// as vLLM and Hugging Face apply it).
struct Penalties {
  float presence = 0.0f;   // OpenAI's range [-2, 2]
  float frequency = 0.0f;  // [-2, 2]
  float repetition = 1.0f; // (0, 2]; 1: none
  bool any() const { return presence != 0.0f || frequency != 0.0f || repetition != 1.0f; }
};
void apply_penalties(std::span<float> logits, const Penalties& penalties, std::span<const TokenId> prompt,
                     std::span<const TokenId> output);

} // namespace optkit::runtime
