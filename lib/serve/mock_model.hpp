// A language model that computes nothing: `serve-deltas --mock` puts it behind the real engine,
// scheduler, KV block accounting and HTTP path, so the server's own overhead can be measured and
// `optkit bench` / `optkit tune` tests get a server that answers at a fixed, known rate. Its logits
// make greedy sampling emit a fixed token cycle; each step can be made to take a set time.
#pragma once

#include "runtime/kv_cache.hpp"
#include "runtime/language_model.hpp"

#include <chrono>
#include <vector>

namespace optkit::serve {

class MockModel final : public runtime::LanguageModel {
public:
  // `config` gives the vocabulary and context (the --base model's config.json); `cycle` the
  // tokens emitted in turn (none of them EOS); each forward() lasts at least `step_time`.
  MockModel(model::ModelConfig config, std::vector<runtime::TokenId> cycle, std::chrono::microseconds step_time,
            runtime::KvCacheOptions kv);

  const model::ModelConfig& config() const override { return m_config; }
  runtime::SequenceId add_sequence() override { return m_cache.add(); }
  void remove_sequence(runtime::SequenceId sequence) override { m_cache.remove(sequence); }
  std::int64_t sequence_length(runtime::SequenceId sequence) const override { return m_cache.length(sequence); }
  std::int64_t reuse_prefix(runtime::SequenceId sequence, std::span<const runtime::TokenId> tokens,
                            std::int32_t variant) override {
    return m_cache.reuse_prefix(sequence, tokens, variant);
  }
  std::vector<float> forward(std::span<const runtime::SequenceInput> inputs) override;

  const runtime::KvCache& kv_cache() const { return m_cache; }

private:
  model::ModelConfig m_config;
  std::vector<runtime::TokenId> m_cycle;
  std::chrono::microseconds m_step_time;
  runtime::KvCache m_cache; // one float per position: only its block accounting matters
};

} // namespace optkit::serve
