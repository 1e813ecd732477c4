// The BPE model of tokenizer.json: a vocabulary, ranked merges, byte fallback, an unknown token
// (optionally fused), ignore_merges, continuing_subword_prefix and end_of_word_suffix. Merging
// follows the Hugging Face order: repeatedly the lowest-ranked adjacent pair, leftmost first, in
// O(n log n) with a heap.
#pragma once

#include "model/token_model.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace optkit::model {

class BpeModel : public TokenModel {
public:
  BpeModel(const nlohmann::json& model, const std::string& source);

  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const override;
  std::string describe() const override;
  bool byte_fallback() const { return m_byte_fallback; }

private:
  struct Merge {
    std::int32_t rank;
    std::int32_t merged;
  };
  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  void initial_symbols(std::string_view word, std::vector<std::int32_t>& ids) const;

  std::unordered_map<std::uint64_t, Merge> m_merges;
  std::optional<std::int32_t> m_unk;
  bool m_fuse_unk = false;
  bool m_byte_fallback = false;
  bool m_ignore_merges = false;
  std::string m_prefix; // continuing_subword_prefix
  std::string m_suffix; // end_of_word_suffix
  std::int32_t m_byte_tokens[256];
};

} // namespace optkit::model
