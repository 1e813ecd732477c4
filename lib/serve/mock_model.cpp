#include "serve/mock_model.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <thread>

namespace optkit::serve {

MockModel::MockModel(model::ModelConfig config, std::vector<runtime::TokenId> cycle,
                     std::chrono::microseconds step_time, runtime::KvCacheOptions kv)
    : m_config(std::move(config))
    , m_cycle(std::move(cycle))
    , m_step_time(step_time)
    , m_cache(1, 1, m_config.max_position_embeddings, kv) {
  if (m_cycle.empty())
    throw InputError("the mock model needs at least one token to emit");
  for (const auto t : m_cycle)
    if (t < 0 || t >= m_config.vocab_size)
      throw InputError("mock token " + std::to_string(t) + " is outside the vocabulary");
}

std::vector<float>
MockModel::forward(std::span<const runtime::SequenceInput> inputs) {
  const auto started = std::chrono::steady_clock::now();
  std::int64_t blocks = 0;
  for (const auto& input : inputs)
    blocks += m_cache.blocks_needed(input.sequence, static_cast<std::int64_t>(input.tokens.size()));
  m_cache.check_free(blocks); // as the real model does: all or nothing
  const auto vocab = static_cast<std::size_t>(m_config.vocab_size);
  std::size_t rows = 0;
  for (const auto& input : inputs)
    rows += input.all_logits ? input.tokens.size() : 1;
  std::vector<float> logits(rows * vocab, 0.0f);
  std::size_t row = 0;
  for (const auto& input : inputs) {
    const auto count = static_cast<std::int64_t>(input.tokens.size());
    const std::int64_t first = m_cache.reserve(input.sequence, count);
    m_cache.advance(input.sequence, input.tokens, input.variant);
    for (std::int64_t i = input.all_logits ? 0 : count - 1; i < count; ++i) {
      const auto position = static_cast<std::size_t>(first + i);
      // a margin no temperature (at most 100) can flatten: the cycle comes out whatever the sampling
      logits[row++ * vocab + static_cast<std::size_t>(m_cycle[position % m_cycle.size()])] = 1e6f;
    }
  }
  std::this_thread::sleep_until(started + m_step_time);
  return logits;
}

} // namespace optkit::serve
