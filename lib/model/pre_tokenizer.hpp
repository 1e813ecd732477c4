// tokenizer.json's pre_tokenizer: Sequence, Split (string or regex pattern, every behavior,
// invert), ByteLevel (with or without its GPT-2 regex), Whitespace, WhitespaceSplit, Digits,
// Punctuation, Metaspace and BertPreTokenizer, each as Hugging Face tokenizers defines it. Regex
// patterns are compiled by Oniguruma, as Hugging Face compiles them; the GPT-2, Llama-3 and Qwen2
// patterns run on hand-written scanners that give the same matches (a differential test holds them
// to Oniguruma) at several times the speed. Any other type is refused at load with its name.
#pragma once

#include "model/onig_regex.hpp"
#include "model/pre_tokenizer_split.hpp"

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace optkit::model {

// How a split treats the pieces its pattern matches (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// One piece of text with whether it is a match of the pattern; `pieces` cover the text in order.
struct MatchedPiece {
  std::size_t start, end;
  bool is_match;
};

// The pieces `behavior` keeps, non-empty, as [start, end) ranges of the text.
std::vector<std::pair<std::size_t, std::size_t>> apply_split_behavior(const std::vector<MatchedPiece>& pieces,
                                                                      SplitBehavior behavior);

class PreTokenizer {
public:
  // `node` is tokenizer.json's "pre_tokenizer" (null: none).
  static PreTokenizer from_json(const nlohmann::json& node, const std::string& source);

  // Splits one normalized section of text (UTF-8) into the words the model encodes, handing each
  // (non-empty) to `word` in order. `first_section`: the section starts the input (Metaspace's
  // prepend_scheme "first"). Pieces flow through the steps one at a time, as views of the text
  // until a step rewrites them, so no step materializes the whole section's pieces.
  using WordSink = std::function<void(std::string_view)>;
  void split(std::string_view text, bool first_section, const WordSink& word) const;
  void split(std::string_view text, bool first_section, std::vector<std::string>& words) const;

  // Whether a ByteLevel step maps bytes to printable characters (so model tokens are byte-level).
  bool byte_level() const { return m_byte_level; }
  std::vector<std::string> component_names() const;

private:
  enum class Kind { regex, chars, byte_level, metaspace };
  enum class CharClass { whitespace, numeric, punctuation };
  struct Step {
    Kind kind;
    std::string name;
    std::shared_ptr<OnigRegex> regex; // regex: the pattern (also ByteLevel's when use_regex)
    std::optional<SplitPattern> fast; // regex: a hand-written scanner with the same matches
    CharClass chars = CharClass::whitespace;
    SplitBehavior behavior = SplitBehavior::isolated;
    bool invert = false;
    bool add_prefix_space = false; // ByteLevel
    std::string literal;           // regex kind without a regex: a Split string pattern, found by plain search
    std::string replacement;       // Metaspace (UTF-8 of one character)
    enum class Prepend { always, first, never } prepend = Prepend::always;
    bool metaspace_split = true;
  };
  // Runs steps[index...] on one piece; `at_start`: it begins at offset 0 of the input's first section.
  void run_from(std::size_t index, std::string_view piece, bool at_start, const WordSink& word) const;

  std::vector<Step> m_steps;
  bool m_byte_level = false;
};

} // namespace optkit::model
