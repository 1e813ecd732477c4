// tokenizer.json's decoder: turns token texts back into text. Sequence, ByteLevel, Replace
// (string or regex), ByteFallback, Fuse, Strip, Metaspace and WordPiece, chained as Hugging Face
// chains them (each step maps the list of token strings to a new list; the result is joined).
// Added tokens pass through ByteLevel verbatim (their text is not byte-level). Without a decoder
// the tokens are joined with spaces.
#pragma once

#include "model/onig_regex.hpp"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

namespace optkit::model {

struct DecodedPiece {
  std::string text;
  bool added = false; // an added token's content
};

class TokenDecoder {
public:
  static TokenDecoder from_json(const nlohmann::json& node, const std::string& source);

  std::string decode(std::vector<DecodedPiece> tokens) const;
  bool byte_level() const { return m_byte_level; }
  std::vector<std::string> component_names() const;

private:
  enum class Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace, wordpiece };
  struct Step {
    Kind kind;
    std::string name;
    std::string pattern, content;     // Replace (literal pattern), Strip (content)
    std::shared_ptr<OnigRegex> regex; // Replace with a regex pattern
    std::size_t start = 0, stop = 0;  // Strip
    bool strip_first_space = false;   // Metaspace
    std::string prefix;               // WordPiece
    bool cleanup = false;             // WordPiece
  };
  void run_step(const Step& step, std::vector<DecodedPiece>& tokens) const;

  std::vector<Step> m_steps;
  bool m_present = false;
  bool m_byte_level = false;
};

// transformers' clean_up_tokenization: " ." -> ".", " 's" -> "'s", ...
void clean_up_tokenization(std::string& text);

} // namespace optkit::model
