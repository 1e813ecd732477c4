#include "model/wordpiece_model.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace optkit::model {

WordPieceModel::WordPieceModel(const nlohmann::json& model, const std::string& source) {
  if (!model.contains("vocab") || !model["vocab"].is_object())
    throw InputError(source + ": WordPiece model.vocab must be an object of token -> id");
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer())
      throw InputError(fmt::format("{}: model.vocab id of '{}' must be an integer", source, token));
    m_vocabulary.add(token, id.get<std::int64_t>(), source);
  }
  const auto unk = model.value("unk_token", std::string("[UNK]"));
  const auto id = m_vocabulary.find(unk);
  if (!id)
    throw InputError(source + ": WordPiece model.unk_token '" + unk + "' is not in the vocabulary");
  m_unk = *id;
  m_prefix = model.value("continuing_subword_prefix", std::string("##"));
  m_max_chars = model.value("max_input_chars_per_word", std::size_t{100});
}

std::string
WordPieceModel::describe() const {
  return "WordPiece";
}

void
WordPieceModel::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  std::size_t chars = 0;
  for (const char c : word)
    chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  if (chars > m_max_chars) {
    out.push_back(m_unk);
    return;
  }
  std::vector<std::int32_t> pieces;
  std::string candidate;
  for (std::size_t start = 0; start < word.size();) {
    std::size_t end = word.size();
    std::optional<std::int32_t> found;
    while (end > start) {
      candidate.assign(start > 0 ? m_prefix : std::string());
      candidate.append(word.substr(start, end - start));
      if ((found = m_vocabulary.find(candidate)))
        break;
      do // back off one whole character
        --end;
      while (end > start && (static_cast<unsigned char>(word[end]) & 0xc0) == 0x80);
    }
    if (!found) {
      out.push_back(m_unk);
      return;
    }
    pieces.push_back(*found);
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

} // namespace optkit::model
