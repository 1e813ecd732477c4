// A Hugging Face tokenizer.json, run as Hugging Face tokenizers runs it: added tokens are split
// out first (special or not; lstrip, rstrip, single_word; normalized ones matched after
// normalization), then the normalizer, the pre-tokenizer, the model (BPE, Unigram, WordPiece) and,
// when special tokens are asked for, the post-processor; decoding runs the decoder chain. Each
// component type it meets is one of those Hugging Face defines; anything else is refused when the
// file is loaded, naming the component, never guessed at. tokenizer_config.json adds
// clean_up_tokenization_spaces and, for the Llama/Gemma tokenizer classes, add_bos_token /
// add_eos_token (which transformers turns into the special-token template).
#pragma once

#include "model/byte_level.hpp"
#include "model/normalizer.hpp"
#include "model/post_processor.hpp"
#include "model/pre_tokenizer.hpp"
#include "model/token_decoder.hpp"
#include "model/token_model.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace optkit::model {

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;  // matched in the normalized text rather than the raw text
  bool single_word = false; // matched only when not inside a word
};

// What a tokenizer is made of, for `optkit doctor --model`.
struct TokenizerComponents {
  std::vector<std::string> normalizer, pre_tokenizer, post_processor, decoder;
  std::string model;
  std::size_t added_tokens = 0, special_tokens = 0;
};

class Tokenizer {
public:
  static Tokenizer load(const std::filesystem::path& tokenizer_json);
  // tokenizer.json of a model folder, with the settings of its tokenizer_config.json when present.
  static Tokenizer load_folder(const std::filesystem::path& model_dir);
  static Tokenizer parse(std::string_view json_text, const std::string& source);

  // add_special_tokens applies the post-processor template (e.g. a leading BOS).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  // Largest id + 1 over the model vocabulary and the added tokens.
  std::int64_t vocab_size() const;
  std::optional<std::int32_t> token_id(std::string_view token) const;
  std::string token_text(std::int32_t id) const;
  // The bytes of text one token stands for (before UTF-8 repair), for bits-per-byte figures.
  std::string token_bytes(std::int32_t id) const;
  TokenizerComponents components() const;
  const std::vector<AddedToken>& added_tokens() const { return m_added; }

private:
  struct Section {
    std::string_view text;
    const AddedToken* added; // null: ordinary text
  };
  Tokenizer() = default;
  // The pipeline a parsed tokenizer.json describes; JSON-library errors escape to parse().
  static Tokenizer from_document(const nlohmann::json& doc, const std::string& source);
  void apply_config(const nlohmann::json& config);
  // Splits text around the added tokens of one kind (normalized or not), leftmost-longest.
  std::vector<Section> split_added(std::string_view text, bool normalized) const;
  void encode_text(std::string_view text, bool first_section, std::vector<std::int32_t>& out) const;
  const AddedToken* find_added(std::int32_t id) const;

  std::unique_ptr<TokenModel> m_model;
  std::vector<AddedToken> m_added;                             // as the file lists them
  std::vector<AddedToken> m_match_raw;                         // non-normalized, longest content first
  std::vector<AddedToken> m_match_norm;                        // normalized (content normalized too), longest first
  std::vector<std::size_t> m_raw_by_byte[256];                 // indices into m_match_raw by first byte
  std::vector<std::size_t> m_norm_by_byte[256];                // indices into m_match_norm by first byte
  std::unordered_map<std::int32_t, std::size_t> m_added_by_id; // index into m_added
  std::unordered_map<std::string, std::int32_t, TransparentHash, std::equal_to<>> m_added_by_content;
  Normalizer m_normalizer;
  PreTokenizer m_pre_tokenizer;
  PostProcessor m_post_processor;
  TokenDecoder m_decoder;
  bool m_clean_up_spaces = false; // transformers' clean_up_tokenization_spaces
};

} // namespace optkit::model
