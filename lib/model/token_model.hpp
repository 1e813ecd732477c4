// The model step of a tokenizer.json: turns one pre-tokenized word into token ids. BPE, Unigram
// and WordPiece implement it; make_token_model picks one from the "model" object and refuses any
// other type by name.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace optkit::model {

// A string hash that accepts string_view, so lookups allocate nothing.
struct TransparentHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Token text <-> id, with lookups by string_view that allocate nothing.
class TokenVocabulary {
public:
  // Throws InputError (naming `source`) for a negative or huge id.
  void add(std::string token, std::int64_t id, const std::string& source);
  std::optional<std::int32_t> find(std::string_view token) const {
    const auto it = m_ids.find(token);
    return it == m_ids.end() ? std::nullopt : std::optional(it->second);
  }
  // The token's text; empty for an id the vocabulary does not have.
  const std::string& token(std::int32_t id) const;
  std::int32_t max_id() const { return static_cast<std::int32_t>(m_tokens.size()) - 1; }
  std::size_t size() const { return m_ids.size(); }

private:
  std::unordered_map<std::string, std::int32_t, TransparentHash, std::equal_to<>> m_ids;
  std::vector<std::string> m_tokens;
};

class TokenModel {
public:
  virtual ~TokenModel() = default;
  // Appends the ids of one pre-tokenized word (UTF-8, non-empty) to `out`.
  virtual void encode_word(std::string_view word, std::vector<std::int32_t>& out) const = 0;
  const TokenVocabulary& vocabulary() const { return m_vocabulary; }
  // "BPE", "Unigram", "WordPiece" with its notable options, e.g. "BPE with byte fallback".
  virtual std::string describe() const = 0;

protected:
  TokenVocabulary m_vocabulary;
};

// `model` is tokenizer.json's "model" object; `source` names the file in errors.
std::unique_ptr<TokenModel> make_token_model(const nlohmann::json& model, const std::string& source);

// The byte-fallback token of a byte ("<0x41>"), as SentencePiece-style vocabularies spell it.
std::string byte_fallback_token(std::uint8_t byte);

} // namespace optkit::model
