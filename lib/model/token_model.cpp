#include "model/token_model.hpp"

#include "core/error.hpp"
#include "model/bpe_model.hpp"
#include "model/tokenizer_json.hpp"
#include "model/unigram_model.hpp"
#include "model/wordpiece_model.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace optkit::model {

void
TokenVocabulary::add(std::string token, std::int64_t id, const std::string& source) {
  if (id < 0 || id > 10'000'000)
    throw InputError(fmt::format("{}: vocabulary id {} of '{}' must be in 0..10000000", source, id, token));
  const auto i = static_cast<std::size_t>(id);
  if (i >= m_tokens.size())
    m_tokens.resize(i + 1);
  m_tokens[i] = token;
  m_ids.emplace(std::move(token), static_cast<std::int32_t>(id));
}

const std::string&
TokenVocabulary::token(std::int32_t id) const {
  static const std::string empty;
  return id >= 0 && static_cast<std::size_t>(id) < m_tokens.size() ? m_tokens[static_cast<std::size_t>(id)] : empty;
}

std::string
byte_fallback_token(std::uint8_t byte) {
  return fmt::format("<0x{:02X}>", byte);
}

std::unique_ptr<TokenModel>
make_token_model(const nlohmann::json& model, const std::string& source) {
  if (!model.is_object())
    throw InputError(source + ": 'model' must be an object");
  auto type = tokenizer_json::type_of(model);
  if (type.empty()) // files written before "type" was serialized: tell the model by its fields
    type = model.contains("merges") ? "BPE" : model.contains("unk_id") ? "Unigram" : "";
  if (type == "BPE")
    return std::make_unique<BpeModel>(model, source);
  if (type == "Unigram")
    return std::make_unique<UnigramModel>(model, source);
  if (type == "WordPiece")
    return std::make_unique<WordPieceModel>(model, source);
  throw InputError(source + ": tokenizer model '" + type + "' is not supported (supported: BPE, Unigram, WordPiece)");
}

} // namespace optkit::model
