// The Unigram model of tokenizer.json (SentencePiece's unigram language model): the segmentation
// of a word with the highest total log-probability (Viterbi), unknown characters scored
// min_score - 10 and fused, byte fallback for them when the vocabulary has <0xXX> tokens. Ties go
// to the piece found first (the shorter), as in Hugging Face's encode_optimized.
#pragma once

#include "model/token_model.hpp"

#include <nlohmann/json_fwd.hpp>

namespace optkit::model {

class UnigramModel : public TokenModel {
public:
  UnigramModel(const nlohmann::json& model, const std::string& source);

  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const override;
  std::string describe() const override;

private:
  std::vector<double> m_scores;
  std::optional<std::int32_t> m_unk;
  bool m_byte_fallback = false;
  double m_min_score = 0;
  std::size_t m_longest_piece = 0; // bytes
};

} // namespace optkit::model
