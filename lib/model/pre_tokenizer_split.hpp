// The regex splits most byte-level BPE tokenizers run before BPE, as hand-written scanners with
// exactly the regexes' leftmost-first semantics: a fast path for the pre-tokenizer, which runs every
// other pattern on Oniguruma (a differential test holds the two to the same matches):
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//           \s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2:  the llama3 pattern with \p{N} taken one digit at a time
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optkit::model {

enum class SplitPattern { gpt2, llama3, qwen2 };

// Recognises a tokenizer.json Split regex (nullopt when it is none of the supported patterns).
std::optional<SplitPattern> recognise_split_pattern(std::string_view regex);
std::string_view split_pattern_name(SplitPattern pattern);
// The regex the scanner implements, as tokenizer.json spells it.
std::string_view split_pattern_regex(SplitPattern pattern);

// Splits `text` into the pieces the pattern matches (their concatenation is `text`).
std::vector<std::u32string_view> split_text(SplitPattern pattern, std::u32string_view text);

} // namespace optkit::model
