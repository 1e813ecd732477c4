#include "model/post_processor.hpp"

#include "core/error.hpp"
#include "model/tokenizer_json.hpp"

#include <nlohmann/json.hpp>

namespace optkit::model {

namespace {

using nlohmann::json;

// BertProcessing / RobertaProcessing name their tokens as ["[CLS]", 101].
std::int32_t
pair_token_id(const json& node, const char* key, const std::string& what) {
  if (!node.contains(key) || !node[key].is_array() || node[key].size() != 2 || !node[key][1].is_number_integer())
    throw InputError(what + ": '" + key + "' must be [token, id]");
  return node[key][1].get<std::int32_t>();
}

} // namespace

PostProcessor
PostProcessor::from_json(const nlohmann::json& node, const std::string& source, const FindToken& find_token) {
  PostProcessor post;
  for (const json& p : tokenizer_json::steps(node, "processors")) {
    const auto type = tokenizer_json::type_of(p);
    const auto what = source + ": post_processor " + type;
    post.m_names.push_back(type);
    if (type == "ByteLevel")
      continue;
    if (type == "BertProcessing" || type == "RobertaProcessing") {
      post.m_templates.push_back(
          {{false, {pair_token_id(p, "cls", what)}}, {true, {}}, {false, {pair_token_id(p, "sep", what)}}});
      continue;
    }
    if (type != "TemplateProcessing")
      throw InputError(source + ": post_processor '" + type +
                       "' is not supported (supported: Sequence, TemplateProcessing, ByteLevel, BertProcessing, "
                       "RobertaProcessing)");
    if (!p.contains("single") || !p["single"].is_array())
      throw InputError(what + " needs a 'single' template");
    std::vector<Piece> pieces;
    for (const auto& piece : p["single"]) {
      if (piece.contains("Sequence")) {
        pieces.push_back({true, {}});
        continue;
      }
      if (!piece.contains("SpecialToken") || !piece["SpecialToken"].contains("id"))
        throw InputError(what + ": template piece " + piece.dump() + " is not understood");
      const auto name = piece["SpecialToken"]["id"].get<std::string>();
      std::vector<std::int32_t> ids;
      if (p.contains("special_tokens") && p["special_tokens"].contains(name) &&
          p["special_tokens"][name].contains("ids"))
        ids = p["special_tokens"][name]["ids"].get<std::vector<std::int32_t>>();
      else if (const auto id = find_token(name))
        ids.push_back(*id);
      if (ids.empty())
        throw InputError(what + " names special token '" + name + "', which the tokenizer does not have");
      pieces.push_back({false, std::move(ids)});
    }
    post.m_templates.push_back(std::move(pieces));
  }
  return post;
}

PostProcessor
PostProcessor::bos_eos(std::optional<std::int32_t> bos, std::optional<std::int32_t> eos) {
  PostProcessor post;
  std::vector<Piece> pieces;
  if (bos)
    pieces.push_back({false, {*bos}});
  pieces.push_back({true, {}});
  if (eos)
    pieces.push_back({false, {*eos}});
  post.m_templates.push_back(std::move(pieces));
  post.m_names.push_back("TemplateProcessing (from tokenizer_config.json add_bos_token/add_eos_token)");
  return post;
}

std::vector<std::int32_t>
PostProcessor::apply(std::vector<std::int32_t> ids) const {
  for (const auto& pieces : m_templates) {
    std::vector<std::int32_t> out;
    out.reserve(ids.size() + 4);
    for (const auto& piece : pieces)
      if (piece.is_sequence)
        out.insert(out.end(), ids.begin(), ids.end());
      else
        out.insert(out.end(), piece.ids.begin(), piece.ids.end());
    ids.swap(out);
  }
  return ids;
}

} // namespace optkit::model
