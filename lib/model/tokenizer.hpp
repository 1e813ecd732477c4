// A Hugging Face tokenizer.json: added/special tokens, normalizer (NFC, Prepend, Replace),
// pre-tokenizer (byte-level with the GPT-2 / Llama-3 / Qwen splits, Metaspace), the BPE model
// (byte-level or SentencePiece-style with byte fallback), post-processor (TemplateProcessing,
// ByteLevel, or a Sequence of them as Llama-3.1/3.2/3.3 ship) and
// decoder. Anything else is refused when the file is loaded, never guessed at.
#pragma once

#include "model/bpe_model.hpp"
#include "model/pre_tokenizer_split.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace optkit::model {

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
};

class Tokenizer {
public:
  static Tokenizer load(const std::filesystem::path& tokenizer_json);
  // tokenizer.json of a model folder, with the decode settings of its tokenizer_config.json
  // (clean_up_tokenization_spaces) when present.
  static Tokenizer load_folder(const std::filesystem::path& model_dir);
  static Tokenizer parse(std::string_view json_text, const std::string& source);

  // add_special_tokens applies the post-processor template (e.g. a leading BOS).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  // Largest id + 1 over the BPE vocabulary and the added tokens.
  std::int64_t vocab_size() const;
  std::optional<std::int32_t> token_id(std::string_view token) const;
  std::string token_text(std::int32_t id) const;
  // The bytes of text one token stands for (before UTF-8 repair), for bits-per-byte figures.
  std::string token_bytes(std::int32_t id) const;
  // e.g. "BPE, byte-level, llama3 split, 2048 tokens"
  std::string describe() const;

private:
  enum class PrependScheme { always, first, never };
  struct NormalizerStep {
    enum class Kind { nfc, prepend, replace } kind;
    std::u32string from, to;
  };
  struct TemplatePiece {
    bool is_sequence = false;
    std::int32_t special_id = 0;
  };

  Tokenizer() = default;
  // The pipeline a parsed tokenizer.json describes; JSON-library errors escape to parse().
  static Tokenizer from_document(const nlohmann::json& doc, const std::string& source);
  void encode_segment(std::string_view text, bool first_segment, std::vector<std::int32_t>& out) const;
  std::string decode_model_tokens(const std::vector<std::string>& tokens, bool first_chunk) const;
  const AddedToken* find_added(std::int32_t id) const;
  // The raw bytes a BPE-model token stands for (byte-level mapping, "<0x41>"-style byte fallback
  // tokens, ▁ as a space).
  std::string model_token_bytes(const std::string& token) const;

  std::unique_ptr<BpeModel> m_model;
  std::vector<AddedToken> m_added; // longest content first
  bool m_added_first_byte[256] = {};
  std::vector<NormalizerStep> m_normalizer;
  std::optional<SplitPattern> m_split;
  bool m_byte_level = false;
  bool m_byte_level_prefix_space = false;
  bool m_metaspace = false;
  bool m_metaspace_split = false;
  PrependScheme m_metaspace_prepend = PrependScheme::never;
  std::vector<TemplatePiece> m_template;
  bool m_decode_strip_space = false; // SentencePiece decoders drop the leading space they added
  bool m_clean_up_spaces = false;    // transformers' clean_up_tokenization_spaces (" ." -> ".", " 's" -> "'s")
};

// The byte <-> printable-character table of byte-level BPE (GPT-2).
char32_t byte_to_char(std::uint8_t byte);
std::optional<std::uint8_t> char_to_byte(char32_t code);

} // namespace optkit::model
