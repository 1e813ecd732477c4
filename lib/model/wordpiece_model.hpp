// The WordPiece model of tokenizer.json (BERT): greedy longest-match-first pieces, the ones after
// the first spelled with continuing_subword_prefix ("##"); a word with an unmatchable part, or
// longer than max_input_chars_per_word characters, is the unknown token.
#pragma once

#include "model/token_model.hpp"

#include <nlohmann/json_fwd.hpp>

namespace optkit::model {

class WordPieceModel : public TokenModel {
public:
  WordPieceModel(const nlohmann::json& model, const std::string& source);

  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const override;
  std::string describe() const override;

private:
  std::int32_t m_unk = 0;
  std::string m_prefix;
  std::size_t m_max_chars = 100;
};

} // namespace optkit::model
