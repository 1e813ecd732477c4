#include "model/tokenizer.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_fields.hpp"
#include "model/gguf_model.hpp"
#include "model/unicode.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace optkit::model {

namespace {

using nlohmann::json;

const json&
member(const json& doc, const char* key) {
  static const json none;
  return doc.contains(key) ? doc[key] : none;
}

std::size_t
previous_char_start(std::string_view text, std::size_t at) {
  std::size_t start = at - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80)
    --start;
  return start;
}

// The character before byte `at` and the one at `at` (0 when none), for single_word and lstrip.
char32_t
char_before(std::string_view text, std::size_t at) {
  if (at == 0)
    return 0;
  const std::size_t start = previous_char_start(text, at);
  const auto decoded = decode_utf8(text.substr(start, at - start));
  return decoded.empty() ? 0 : decoded[0];
}

char32_t
char_at(std::string_view text, std::size_t at) {
  if (at >= text.size())
    return 0;
  const auto decoded = decode_utf8(
      text.substr(at, std::min(utf8_sequence_length(static_cast<unsigned char>(text[at])), text.size() - at)));
  return decoded.empty() ? 0 : decoded[0];
}

bool
word_char(char32_t c) {
  return c == U'_' || is_letter(c) || is_number(c);
}

// transformers' fast Llama/Gemma tokenizers rebuild the special-token template from
// tokenizer_config.json (add_bos_token defaults to true, add_eos_token to false).
bool
rebuilds_template(const std::string& tokenizer_class) {
  for (const char* name : {"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast",
                           "GemmaTokenizer", "GemmaTokenizerFast"})
    if (tokenizer_class == name)
      return true;
  return false;
}

std::string
config_token(const json& config, const char* key) {
  const auto& v = member(config, key);
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return {};
}

} // namespace

Tokenizer
Tokenizer::load(const std::filesystem::path& path) {
  return parse(read_input_file(path, "the model folder needs a tokenizer.json"), path.string());
}

Tokenizer
Tokenizer::load_folder(const std::filesystem::path& model_dir) {
  if (is_gguf_model(model_dir))
    return parse(gguf_tokenizer_json(GgufFile(model_dir)), model_dir.string() + " (its vocabulary)");
  auto tokenizer = load(model_dir / "tokenizer.json");
  const auto config_path = model_dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    const auto config = read_json_file(config_path);
    if (config.is_object())
      read_json_fields(config_path.string(), [&] { tokenizer.apply_config(config); });
  }
  return tokenizer;
}

void
Tokenizer::apply_config(const nlohmann::json& config) {
  if (config.contains("clean_up_tokenization_spaces") && config["clean_up_tokenization_spaces"].is_boolean())
    m_clean_up_spaces = config["clean_up_tokenization_spaces"].get<bool>();
  if (!rebuilds_template(config.value("tokenizer_class", std::string())))
    return;
  const bool add_bos = config.contains("add_bos_token") && config["add_bos_token"].is_boolean()
                           ? config["add_bos_token"].get<bool>()
                           : true;
  const bool add_eos = config.contains("add_eos_token") && config["add_eos_token"].is_boolean()
                           ? config["add_eos_token"].get<bool>()
                           : false;
  std::optional<std::int32_t> bos, eos;
  if (add_bos && !(bos = token_id(config_token(config, "bos_token"))))
    throw InputError("tokenizer_config.json: add_bos_token is true but bos_token '" +
                     config_token(config, "bos_token") + "' is not a token of tokenizer.json");
  if (add_eos && !(eos = token_id(config_token(config, "eos_token"))))
    throw InputError("tokenizer_config.json: add_eos_token is true but eos_token '" +
                     config_token(config, "eos_token") + "' is not a token of tokenizer.json");
  m_post_processor = PostProcessor::bos_eos(bos, eos);
}

Tokenizer
Tokenizer::parse(std::string_view json_text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    throw InputError(source + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object())
    throw InputError(source + ": not a JSON object");
  return read_json_fields(source, [&] { return from_document(doc, source); });
}

Tokenizer
Tokenizer::from_document(const nlohmann::json& doc, const std::string& source) {
  Tokenizer t;
  t.m_model = make_token_model(member(doc, "model"), source);
  t.m_normalizer = Normalizer::from_json(member(doc, "normalizer"), source);
  t.m_pre_tokenizer = PreTokenizer::from_json(member(doc, "pre_tokenizer"), source);
  t.m_decoder = TokenDecoder::from_json(member(doc, "decoder"), source);

  const auto& added = member(doc, "added_tokens");
  if (!added.is_null() && !added.is_array())
    throw InputError(source + ": added_tokens must be an array");
  if (added.is_array())
    for (const auto& a : added) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || a["id"].get<std::int64_t>() < 0 ||
          !a.contains("content") || !a["content"].is_string() || a["content"].get<std::string>().empty())
        throw InputError(source +
                         ": each added_tokens entry needs a non-negative integer 'id' and a non-empty 'content'");
      AddedToken token{static_cast<std::int32_t>(a["id"].get<std::int64_t>()), a["content"].get<std::string>()};
      token.special = a.value("special", false);
      token.lstrip = a.value("lstrip", false);
      token.rstrip = a.value("rstrip", false);
      token.single_word = a.value("single_word", false);
      token.normalized = a.value("normalized", !token.special);
      t.m_added.push_back(token);
      if (token.normalized && !t.m_normalizer.empty()) {
        token.content = t.m_normalizer.apply(token.content);
        if (!token.content.empty())
          t.m_match_norm.push_back(std::move(token));
      } else {
        t.m_match_raw.push_back(std::move(token));
      }
    }
  const auto longest_first = [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  };
  std::stable_sort(t.m_match_raw.begin(), t.m_match_raw.end(), longest_first);
  std::stable_sort(t.m_match_norm.begin(), t.m_match_norm.end(), longest_first);
  for (std::size_t i = 0; i < t.m_match_raw.size(); ++i)
    t.m_raw_by_byte[static_cast<unsigned char>(t.m_match_raw[i].content[0])].push_back(i);
  for (std::size_t i = 0; i < t.m_match_norm.size(); ++i)
    t.m_norm_by_byte[static_cast<unsigned char>(t.m_match_norm[i].content[0])].push_back(i);
  for (std::size_t i = 0; i < t.m_added.size(); ++i) {
    t.m_added_by_id.emplace(t.m_added[i].id, i);
    t.m_added_by_content.emplace(t.m_added[i].content, t.m_added[i].id);
  }

  t.m_post_processor = PostProcessor::from_json(member(doc, "post_processor"), source,
                                                [&t](std::string_view name) { return t.token_id(name); });
  return t;
}

std::int64_t
Tokenizer::vocab_size() const {
  std::int64_t size = m_model->vocabulary().max_id() + 1;
  for (const auto& a : m_added)
    size = std::max<std::int64_t>(size, a.id + 1);
  return size;
}

std::optional<std::int32_t>
Tokenizer::token_id(std::string_view token) const {
  if (const auto it = m_added_by_content.find(token); it != m_added_by_content.end())
    return it->second;
  return m_model->vocabulary().find(token);
}

const AddedToken*
Tokenizer::find_added(std::int32_t id) const {
  const auto it = m_added_by_id.find(id);
  return it == m_added_by_id.end() ? nullptr : &m_added[it->second];
}

std::string
Tokenizer::token_text(std::int32_t id) const {
  if (const auto* added = find_added(id))
    return added->content;
  return m_model->vocabulary().token(id);
}

std::string
Tokenizer::token_bytes(std::int32_t id) const {
  if (const auto* added = find_added(id))
    return added->content;
  const auto& token = m_model->vocabulary().token(id);
  if (m_pre_tokenizer.byte_level() || m_decoder.byte_level())
    if (auto bytes = byte_level_bytes(token))
      return *bytes;
  if (token.size() == 6 && token.starts_with("<0x") && token.back() == '>' &&
      std::isxdigit(static_cast<unsigned char>(token[3])) && std::isxdigit(static_cast<unsigned char>(token[4]))) {
    const auto value = std::stoi(token.substr(3, 2), nullptr, 16);
    return std::string(1, static_cast<char>(value));
  }
  std::string bytes = token;
  for (std::size_t at = bytes.find("\u2581"); at != std::string::npos; at = bytes.find("\u2581", at + 1))
    bytes.replace(at, 3, " ");
  return bytes;
}

TokenizerComponents
Tokenizer::components() const {
  TokenizerComponents c{m_normalizer.component_names(), m_pre_tokenizer.component_names(),
                        m_post_processor.component_names(), m_decoder.component_names(), m_model->describe()};
  c.added_tokens = m_added.size();
  c.special_tokens = static_cast<std::size_t>(
      std::count_if(m_added.begin(), m_added.end(), [](const AddedToken& a) { return a.special; }));
  return c;
}

std::vector<Tokenizer::Section>
Tokenizer::split_added(std::string_view text, bool normalized) const {
  const auto& tokens = normalized ? m_match_norm : m_match_raw;
  const auto& by_byte = normalized ? m_norm_by_byte : m_raw_by_byte;
  std::vector<Section> sections;
  if (tokens.empty()) {
    sections.push_back({text, nullptr});
    return sections;
  }
  std::size_t segment_start = 0;
  for (std::size_t i = 0; i < text.size();) {
    const AddedToken* match = nullptr;
    for (const auto index : by_byte[static_cast<unsigned char>(text[i])]) {
      const auto& a = tokens[index];
      if (text.compare(i, a.content.size(), a.content) != 0)
        continue;
      if (a.single_word && (word_char(char_before(text, i)) || word_char(char_at(text, i + a.content.size()))))
        continue;
      match = &a;
      break;
    }
    if (!match) {
      ++i;
      continue;
    }
    std::size_t segment_end = i;
    if (match->lstrip)
      while (segment_end > segment_start && is_whitespace(char_before(text, segment_end)))
        segment_end = previous_char_start(text, segment_end);
    sections.push_back({text.substr(segment_start, segment_end - segment_start), nullptr});
    sections.push_back({std::string_view(match->content), match});
    i += match->content.size();
    if (match->rstrip)
      while (i < text.size() && is_whitespace(char_at(text, i)))
        i += utf8_sequence_length(static_cast<unsigned char>(text[i]));
    segment_start = i;
  }
  sections.push_back({text.substr(segment_start), nullptr});
  return sections;
}

void
Tokenizer::encode_text(std::string_view text, bool first_section, std::vector<std::int32_t>& out) const {
  if (text.empty())
    return;
  std::string normalized;
  if (!m_normalizer.empty()) {
    normalized = m_normalizer.apply(text);
    text = normalized;
  }
  const auto encode_word = [&](std::string_view word) { m_model->encode_word(word, out); };
  bool first = first_section;
  for (const auto& section : split_added(text, true)) {
    if (section.added)
      out.push_back(section.added->id);
    else if (!section.text.empty())
      m_pre_tokenizer.split(section.text, first, encode_word);
    first = false;
  }
}

std::vector<std::int32_t>
Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<std::int32_t> body;
  bool first = true;
  for (const auto& section : split_added(text, false)) {
    if (section.added)
      body.push_back(section.added->id);
    else
      encode_text(section.text, first, body);
    first = false;
  }
  if (!add_special_tokens || m_post_processor.empty())
    return body;
  return m_post_processor.apply(std::move(body));
}

std::string
Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::vector<DecodedPiece> tokens;
  tokens.reserve(ids.size());
  for (const auto id : ids) {
    if (const auto* added = find_added(id)) {
      if (!(skip_special_tokens && added->special))
        tokens.push_back({added->content, true});
      continue;
    }
    const auto& token = m_model->vocabulary().token(id);
    if (token.empty())
      throw InputError(fmt::format("token id {} is not in the tokenizer's vocabulary of {}", id, vocab_size()));
    tokens.push_back({token, false});
  }
  auto text = m_decoder.decode(std::move(tokens));
  if (m_clean_up_spaces)
    clean_up_tokenization(text);
  return text;
}

} // namespace optkit::model
