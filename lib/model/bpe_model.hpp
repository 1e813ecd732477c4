// The BPE model of tokenizer.json: a vocabulary, ranked merges, byte fallback, unknown token.
// Merging follows the Hugging Face order: repeatedly the lowest-ranked adjacent pair, leftmost
// first, in O(n log n) with a heap.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace optkit::model {

class BpeModel {
public:
  // `model` is tokenizer.json's "model" object; `source` names the file in errors.
  BpeModel(const nlohmann::json& model, const std::string& source);

  // Appends the ids of one pre-tokenized word (UTF-8) to `out`.
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;

  std::optional<std::int32_t> find(std::string_view token) const;
  // The token text; empty for ids not in the BPE vocabulary.
  const std::string& token(std::int32_t id) const;
  std::int32_t max_id() const { return static_cast<std::int32_t>(m_tokens.size()) - 1; }
  bool byte_fallback() const { return m_byte_fallback; }
  std::size_t size() const { return m_vocab.size(); }

private:
  struct Merge {
    std::int32_t rank;
    std::int32_t merged;
  };
  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  void initial_symbols(std::string_view word, std::vector<std::int32_t>& ids) const;

  std::unordered_map<std::string, std::int32_t> m_vocab;
  std::vector<std::string> m_tokens;
  std::unordered_map<std::uint64_t, Merge> m_merges;
  std::optional<std::int32_t> m_unk;
  bool m_fuse_unk = false;
  bool m_byte_fallback = false;
  bool m_ignore_merges = false;
  std::int32_t m_byte_tokens[256];
};

} // namespace optkit::model
