#include "model/unigram_model.hpp"

#include "core/error.hpp"
#include "model/unicode.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <nlohmann/json.hpp>

namespace optkit::model {

namespace {

constexpr double kUnknownPenalty = 10.0;

} // namespace

UnigramModel::UnigramModel(const nlohmann::json& model, const std::string& source) {
  if (!model.contains("vocab") || !model["vocab"].is_array() || model["vocab"].empty())
    throw InputError(source + ": Unigram model.vocab must be a non-empty array of [piece, score]");
  m_min_score = std::numeric_limits<double>::infinity();
  std::int64_t id = 0;
  for (const auto& entry : model["vocab"]) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
      throw InputError(fmt::format("{}: Unigram model.vocab[{}] must be [piece, score]", source, id));
    const auto piece = entry[0].get<std::string>();
    m_vocabulary.add(piece, id++, source);
    m_scores.push_back(entry[1].get<double>());
    m_min_score = std::min(m_min_score, m_scores.back());
    m_longest_piece = std::max(m_longest_piece, piece.size());
  }
  if (model.contains("unk_id") && !model["unk_id"].is_null()) {
    const auto unk = model["unk_id"].get<std::int64_t>();
    if (unk < 0 || unk >= id)
      throw InputError(fmt::format("{}: Unigram model.unk_id {} is outside the vocabulary of {}", source, unk, id));
    m_unk = static_cast<std::int32_t>(unk);
  }
  m_byte_fallback = model.value("byte_fallback", false);
}

std::string
UnigramModel::describe() const {
  return m_byte_fallback ? "Unigram with byte fallback" : "Unigram";
}

void
UnigramModel::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  struct Node {
    std::int32_t id = -1;
    double score = 0;
    std::size_t start = 0;
    bool reached = false;
  };
  const std::size_t size = word.size();
  std::vector<Node> best(size + 1);
  best[0].reached = true;
  const double unknown_score = m_min_score - kUnknownPenalty;
  for (std::size_t start = 0; start < size;) {
    const std::size_t char_length =
        std::min(utf8_sequence_length(static_cast<unsigned char>(word[start])), size - start);
    const double base = best[start].score;
    bool single_char_piece = false;
    // Candidate pieces starting here, shortest first (a trie's common-prefix search order).
    for (std::size_t end = start + 1; end <= size && end - start <= m_longest_piece; ++end) {
      if (end < size && (static_cast<unsigned char>(word[end]) & 0xc0) == 0x80)
        continue; // not a character boundary
      const auto id = m_vocabulary.find(word.substr(start, end - start));
      if (!id)
        continue;
      const double candidate = base + m_scores[static_cast<std::size_t>(*id)];
      auto& node = best[end];
      if (!node.reached || candidate > node.score)
        node = {*id, candidate, start, true};
      if (end - start == char_length)
        single_char_piece = true;
    }
    if (!single_char_piece) {
      auto& node = best[start + char_length];
      const double candidate = base + unknown_score;
      if (!node.reached || candidate > node.score)
        node = {m_unk.value_or(-1), candidate, start, true};
    }
    start += char_length;
  }
  // Walk back; consecutive unknown pieces fuse into one.
  struct Piece {
    std::size_t start, end;
    bool unknown;
  };
  std::vector<Piece> pieces;
  for (std::size_t end = size; end > 0;) {
    const auto& node = best[end];
    const bool unknown = !m_unk ? node.id < 0 : node.id == *m_unk;
    if (unknown && !pieces.empty() && pieces.back().unknown)
      pieces.back().start = node.start;
    else
      pieces.push_back({node.start, end, unknown});
    end = node.start;
  }
  std::reverse(pieces.begin(), pieces.end());
  for (const auto& piece : pieces) {
    const auto text = word.substr(piece.start, piece.end - piece.start);
    if (const auto id = m_vocabulary.find(text)) {
      out.push_back(*id);
      continue;
    }
    if (m_byte_fallback) {
      std::vector<std::int32_t> bytes;
      for (const char c : text)
        if (const auto id = m_vocabulary.find(byte_fallback_token(static_cast<std::uint8_t>(c))))
          bytes.push_back(*id);
      if (bytes.size() == text.size()) {
        out.insert(out.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (!m_unk)
      throw InputError("text contains '" + std::string(text) +
                       "', which this Unigram tokenizer cannot encode (no such piece and no unk_id)");
    out.push_back(*m_unk);
  }
}

} // namespace optkit::model
