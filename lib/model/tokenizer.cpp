#include "model/tokenizer.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_fields.hpp"
#include "model/unicode.hpp"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <functional>

namespace optkit::model {

namespace {

using nlohmann::json;
constexpr char32_t kMetaspace = U'\u2581';

struct ByteTable {
  char32_t to_char[256];
  ByteTable() {
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
    }
  }
};

const ByteTable&
byte_table() {
  static const ByteTable table;
  return table;
}

std::string
type_of(const json& node) {
  return node.is_object() && node.contains("type") && node["type"].is_string() ? node["type"].get<std::string>() : "";
}

std::u32string
u32(const json& node, const std::string& source, const char* what) {
  if (!node.is_string())
    throw InputError(source + ": " + what + " must be a string");
  return decode_utf8(node.get<std::string>());
}

// A member of the document, or null when absent. A reference into the document, never a copy,
// so an error about it names its full path.
const json&
member(const json& doc, const char* key) {
  static const json none;
  return doc.contains(key) ? doc[key] : none;
}

// The steps of a pipeline stage (references into the document): none when null or absent, the
// list of a "Sequence", else the one step itself.
std::vector<std::reference_wrapper<const json>>
pipeline_steps(const json& doc, const char* stage, const char* sequence_key) {
  const auto& node = member(doc, stage);
  if (node.is_null())
    return {};
  if (type_of(node) == "Sequence" && node.contains(sequence_key) && node[sequence_key].is_array())
    return {node[sequence_key].begin(), node[sequence_key].end()};
  return {std::cref(node)};
}

void
replace_all(std::u32string& text, const std::u32string& from, const std::u32string& to) {
  if (from.empty())
    return;
  std::u32string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  text.swap(out);
}

} // namespace

char32_t
byte_to_char(std::uint8_t byte) {
  return byte_table().to_char[byte];
}

std::optional<std::uint8_t>
char_to_byte(char32_t code) {
  if (code < 256 && byte_table().to_char[code] == code)
    return static_cast<std::uint8_t>(code);
  if (code >= 256 && code < 256 + 68)
    for (int b = 0; b < 256; ++b)
      if (byte_table().to_char[b] == code)
        return static_cast<std::uint8_t>(b);
  return std::nullopt;
}

Tokenizer
Tokenizer::load(const std::filesystem::path& path) {
  return parse(read_input_file(path, "the model folder needs a tokenizer.json"), path.string());
}

Tokenizer
Tokenizer::load_folder(const std::filesystem::path& model_dir) {
  auto tokenizer = load(model_dir / "tokenizer.json");
  const auto config_path = model_dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    const auto config = read_json_file(config_path);
    if (config.is_object() && config.contains("clean_up_tokenization_spaces") &&
        config["clean_up_tokenization_spaces"].is_boolean())
      tokenizer.m_clean_up_spaces = config["clean_up_tokenization_spaces"].get<bool>();
  }
  return tokenizer;
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
  const auto fail = [&](const std::string& what) { throw InputError(source + ": " + what); };
  Tokenizer t;

  const auto& model = member(doc, "model");
  const auto model_type = type_of(model);
  if (model_type != "BPE" && !(model_type.empty() && model.is_object() && model.contains("merges")))
    fail("tokenizer model '" + model_type + "' is not supported (supported: BPE)");
  t.m_model = std::make_unique<BpeModel>(model, source);

  if (doc.contains("added_tokens") && doc["added_tokens"].is_array())
    for (const auto& a : doc["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string() || a["content"].get<std::string>().empty())
        fail("each added_tokens entry needs an integer 'id' and a non-empty 'content'");
      t.m_added.push_back({static_cast<std::int32_t>(a["id"].get<std::int64_t>()), a["content"].get<std::string>(),
                           a.value("special", false), a.value("lstrip", false), a.value("rstrip", false)});
    }
  std::stable_sort(t.m_added.begin(), t.m_added.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (const auto& a : t.m_added)
    t.m_added_first_byte[static_cast<unsigned char>(a.content[0])] = true;

  for (const json& n : pipeline_steps(doc, "normalizer", "normalizers")) {
    const auto type = type_of(n);
    if (type == "NFC")
      t.m_normalizer.push_back({NormalizerStep::Kind::nfc, {}, {}});
    else if (type == "Prepend")
      t.m_normalizer.push_back(
          {NormalizerStep::Kind::prepend, {}, u32(n.value("prepend", json()), source, "Prepend.prepend")});
    else if (type == "Replace" && n.contains("pattern") && n["pattern"].contains("String"))
      t.m_normalizer.push_back({NormalizerStep::Kind::replace, u32(n["pattern"]["String"], source, "Replace.pattern"),
                                u32(n.value("content", json()), source, "Replace.content")});
    else
      fail("normalizer '" + type +
           "' is not supported (supported: NFC, Prepend, Replace with a string pattern, Sequence)");
  }

  for (const json& p : pipeline_steps(doc, "pre_tokenizer", "pretokenizers")) {
    const auto type = type_of(p);
    if (type == "ByteLevel") {
      t.m_byte_level = true;
      t.m_byte_level_prefix_space = p.value("add_prefix_space", false);
      if (p.value("use_regex", true)) {
        if (t.m_split)
          fail("pre_tokenizer has two regex splits");
        t.m_split = SplitPattern::gpt2;
      }
    } else if (type == "Split") {
      const auto regex = p.contains("pattern") && p["pattern"].contains("Regex") && p["pattern"]["Regex"].is_string()
                             ? p["pattern"]["Regex"].get<std::string>()
                             : std::string();
      const auto pattern = recognise_split_pattern(regex);
      if (!pattern || p.value("behavior", "") != "Isolated" || p.value("invert", false))
        fail("pre_tokenizer Split with regex '" + regex +
             "' is not supported (supported: the GPT-2, Llama-3 and Qwen2 patterns, behavior Isolated)");
      if (t.m_split)
        fail("pre_tokenizer has two regex splits");
      t.m_split = pattern;
    } else if (type == "Metaspace") {
      t.m_metaspace = true;
      if (p.value("replacement", "\u2581") != "\u2581")
        fail("Metaspace replacement other than U+2581 is not supported");
      t.m_metaspace_split = p.value("split", true);
      const auto scheme = p.value("prepend_scheme", p.value("add_prefix_space", true) ? "always" : "never");
      t.m_metaspace_prepend = scheme == "first"   ? PrependScheme::first
                              : scheme == "never" ? PrependScheme::never
                                                  : PrependScheme::always;
    } else {
      fail("pre_tokenizer '" + type + "' is not supported (supported: ByteLevel, Split, Metaspace, Sequence)");
    }
  }
  if (t.m_split && !t.m_byte_level)
    fail("a regex split without ByteLevel is not supported");

  const auto& decoder = member(doc, "decoder");
  const auto decoder_type = type_of(decoder);
  if (decoder_type == "ByteLevel") {
    if (!t.m_byte_level)
      fail("ByteLevel decoder without a ByteLevel pre_tokenizer is not supported");
  } else if (decoder_type == "Metaspace") {
    t.m_decode_strip_space =
        decoder.value("prepend_scheme", decoder.value("add_prefix_space", true) ? "always" : "never") != "never";
  } else if (decoder_type == "Sequence" && decoder.contains("decoders")) {
    for (const auto& d : decoder["decoders"]) {
      const auto type = type_of(d);
      if (type == "Strip" && d.value("start", 0) > 0)
        t.m_decode_strip_space = true;
      else if (type != "Replace" && type != "ByteFallback" && type != "Fuse" && type != "Strip")
        fail("decoder '" + type +
             "' is not supported (supported: ByteLevel, Metaspace, Sequence of Replace, "
             "ByteFallback, Fuse, Strip)");
    }
  } else if (!decoder.is_null()) {
    fail("decoder '" + decoder_type + "' is not supported (supported: ByteLevel, Metaspace, Sequence)");
  }

  // Post-processors that change ids: TemplateProcessing (at most one). ByteLevel only adjusts
  // offsets, so a Sequence of the two (Llama-3.1/3.2/3.3) adds the template's special tokens.
  const auto template_processing = [&](const json& post) {
    if (!t.m_template.empty())
      fail("post_processor has two TemplateProcessing steps");
    if (!post.contains("single") || !post["single"].is_array())
      fail("post_processor TemplateProcessing needs a 'single' template");
    for (const auto& piece : post["single"]) {
      if (piece.contains("Sequence")) {
        t.m_template.push_back({true, 0});
      } else if (piece.contains("SpecialToken") && piece["SpecialToken"].contains("id")) {
        const auto name = piece["SpecialToken"]["id"].get<std::string>();
        std::optional<std::int32_t> id;
        if (post.contains("special_tokens") && post["special_tokens"].contains(name) &&
            post["special_tokens"][name].contains("ids") && !post["special_tokens"][name]["ids"].empty())
          id = post["special_tokens"][name]["ids"][0].get<std::int32_t>();
        if (!id)
          id = t.token_id(name);
        if (!id)
          fail("post_processor names special token '" + name + "', which the tokenizer does not have");
        t.m_template.push_back({false, *id});
      } else {
        fail("post_processor template piece " + piece.dump() + " is not understood");
      }
    }
  };
  for (const json& post : pipeline_steps(doc, "post_processor", "processors")) {
    const auto post_type = type_of(post);
    if (post_type == "TemplateProcessing")
      template_processing(post);
    else if (post_type != "ByteLevel")
      fail("post_processor '" + post_type +
           "' is not supported (supported: TemplateProcessing, ByteLevel, Sequence of them)");
  }
  return t;
}

std::int64_t
Tokenizer::vocab_size() const {
  std::int64_t size = m_model->max_id() + 1;
  for (const auto& a : m_added)
    size = std::max<std::int64_t>(size, a.id + 1);
  return size;
}

std::optional<std::int32_t>
Tokenizer::token_id(std::string_view token) const {
  for (const auto& a : m_added)
    if (a.content == token)
      return a.id;
  return m_model->find(token);
}

const AddedToken*
Tokenizer::find_added(std::int32_t id) const {
  const auto it = std::find_if(m_added.begin(), m_added.end(), [&](const AddedToken& a) { return a.id == id; });
  return it == m_added.end() ? nullptr : &*it;
}

std::string
Tokenizer::token_text(std::int32_t id) const {
  if (const auto* added = find_added(id))
    return added->content;
  return m_model->token(id);
}

std::string
Tokenizer::model_token_bytes(const std::string& token) const {
  std::string bytes;
  if (m_byte_level) {
    for (const char32_t c : decode_utf8(token)) {
      if (const auto b = char_to_byte(c))
        bytes.push_back(static_cast<char>(*b));
      else
        append_utf8(bytes, c);
    }
    return bytes;
  }
  unsigned value = 0;
  if (token.size() == 6 && token.starts_with("<0x") && token.back() == '>' &&
      std::sscanf(token.c_str() + 3, "%2X", &value) == 1)
    return std::string(1, static_cast<char>(value));
  for (const char32_t c : decode_utf8(token))
    append_utf8(bytes, c == kMetaspace ? U' ' : c);
  return bytes;
}

std::string
Tokenizer::token_bytes(std::int32_t id) const {
  if (const auto* added = find_added(id))
    return added->content;
  return model_token_bytes(m_model->token(id));
}

std::string
Tokenizer::describe() const {
  std::string kind =
      m_byte_level ? "byte-level BPE" : (m_model->byte_fallback() ? "SentencePiece BPE with byte fallback" : "BPE");
  if (m_split)
    kind += fmt::format(", {} split", split_pattern_name(*m_split));
  return fmt::format("{}, {} tokens", kind, vocab_size());
}

void
Tokenizer::encode_segment(std::string_view text, bool first_segment, std::vector<std::int32_t>& out) const {
  if (text.empty())
    return;
  std::u32string s = decode_utf8(text);
  for (const auto& step : m_normalizer) {
    switch (step.kind) {
    case NormalizerStep::Kind::nfc:
      s = to_nfc(s);
      break;
    case NormalizerStep::Kind::prepend:
      if (!s.empty())
        s = step.to + s;
      break;
    case NormalizerStep::Kind::replace:
      replace_all(s, step.from, step.to);
      break;
    }
  }
  std::vector<std::u32string> words;
  if (m_metaspace) {
    replace_all(s, U" ", std::u32string(1, kMetaspace));
    const bool prepend =
        m_metaspace_prepend == PrependScheme::always || (m_metaspace_prepend == PrependScheme::first && first_segment);
    if (prepend && (s.empty() || s[0] != kMetaspace))
      s.insert(s.begin(), kMetaspace);
    if (m_metaspace_split) {
      std::size_t start = 0;
      for (std::size_t i = 1; i <= s.size(); ++i)
        if (i == s.size() || s[i] == kMetaspace) {
          words.push_back(s.substr(start, i - start));
          start = i;
        }
    } else {
      words.push_back(s);
    }
  } else {
    if (m_byte_level_prefix_space && !s.empty() && !is_whitespace(s[0]))
      s.insert(s.begin(), U' ');
    if (m_split)
      for (const auto piece : split_text(*m_split, s))
        words.emplace_back(piece);
    else
      words.push_back(s);
  }
  std::string word;
  for (const auto& w : words) {
    if (w.empty())
      continue;
    word.clear();
    if (m_byte_level) {
      for (const char byte : encode_utf8(w))
        append_utf8(word, byte_to_char(static_cast<std::uint8_t>(byte)));
    } else {
      word = encode_utf8(w);
    }
    m_model->encode_word(word, out);
  }
}

std::vector<std::int32_t>
Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<std::int32_t> body;
  std::size_t segment_start = 0;
  bool first_segment = true;
  for (std::size_t i = 0; i < text.size();) {
    const AddedToken* match = nullptr;
    if (m_added_first_byte[static_cast<unsigned char>(text[i])])
      for (const auto& a : m_added)
        if (text.compare(i, a.content.size(), a.content) == 0) {
          match = &a;
          break;
        }
    if (!match) {
      ++i;
      continue;
    }
    std::size_t segment_end = i;
    if (match->lstrip)
      while (segment_end > segment_start && is_whitespace(static_cast<unsigned char>(text[segment_end - 1])))
        --segment_end;
    encode_segment(text.substr(segment_start, segment_end - segment_start), first_segment, body);
    first_segment = false;
    body.push_back(match->id);
    i += match->content.size();
    if (match->rstrip)
      while (i < text.size() && is_whitespace(static_cast<unsigned char>(text[i])))
        ++i;
    segment_start = i;
  }
  encode_segment(text.substr(segment_start), first_segment, body);
  if (!add_special_tokens || m_template.empty())
    return body;
  std::vector<std::int32_t> out;
  for (const auto& piece : m_template) {
    if (piece.is_sequence)
      out.insert(out.end(), body.begin(), body.end());
    else
      out.push_back(piece.special_id);
  }
  return out;
}

std::string
Tokenizer::decode_model_tokens(const std::vector<std::string>& tokens, bool first_chunk) const {
  std::string bytes;
  for (const auto& token : tokens)
    bytes += model_token_bytes(token);
  std::string out = repair_utf8(bytes);
  if (!m_byte_level && first_chunk && m_decode_strip_space && !out.empty() && out[0] == ' ')
    out.erase(0, 1);
  return out;
}

std::string
Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  std::vector<std::string> pending;
  bool first_chunk = true;
  const auto flush = [&] {
    if (pending.empty())
      return;
    out += decode_model_tokens(pending, first_chunk);
    first_chunk = false;
    pending.clear();
  };
  for (const auto id : ids) {
    if (const auto* added = find_added(id)) {
      flush();
      if (!(skip_special_tokens && added->special))
        out += added->content;
      continue;
    }
    const auto& token = m_model->token(id);
    if (token.empty())
      throw InputError(fmt::format("token id {} is not in the tokenizer's vocabulary of {}", id, vocab_size()));
    pending.push_back(token);
  }
  flush();
  if (m_clean_up_spaces)
    for (const auto& [from, to] : std::initializer_list<std::pair<std::string_view, std::string_view>>{{" .", "."},
                                                                                                       {" ?", "?"},
                                                                                                       {" !", "!"},
                                                                                                       {" ,", ","},
                                                                                                       {" ' ", "'"},
                                                                                                       {" n't", "n't"},
                                                                                                       {" 'm", "'m"},
                                                                                                       {" 's", "'s"},
                                                                                                       {" 've", "'ve"},
                                                                                                       {" 're", "'re"}})
      for (std::size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
        out.replace(at, from.size(), to);
  return out;
}

} // namespace optkit::model
