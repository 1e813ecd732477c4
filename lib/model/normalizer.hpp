// tokenizer.json's normalizer: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents,
// Prepend, Replace (string or regex) and BertNormalizer, each as Hugging Face tokenizers defines
// it. Any other type is refused at load with its name.
#pragma once

#include "model/onig_regex.hpp"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace optkit::model {

class Normalizer {
public:
  // `node` is tokenizer.json's "normalizer" (null: none); `source` names the file in errors.
  static Normalizer from_json(const nlohmann::json& node, const std::string& source);

  // Normalizes UTF-8 text.
  std::string apply(std::string_view text) const;
  bool empty() const { return m_steps.empty(); }
  // e.g. {"NFC", "Replace"}
  std::vector<std::string> component_names() const;

private:
  enum class Kind { nfc, nfd, nfkc, nfkd, lowercase, strip, strip_accents, prepend, replace, bert };
  struct Step {
    Kind kind;
    std::string name;
    std::u32string text, content;     // Prepend's text; Replace's literal pattern and content
    std::shared_ptr<OnigRegex> regex; // Replace with a regex pattern
    bool left = false, right = false; // Strip
    bool clean_text = false, chinese_chars = false, strip_accents = false, lowercase = false; // Bert
  };
  void apply_step(const Step& step, std::u32string& text) const;

  std::vector<Step> m_steps;
};

} // namespace optkit::model
