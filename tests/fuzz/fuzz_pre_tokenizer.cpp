// libFuzzer target for the regex-driven pre-tokenizer. First byte: bits 0-2 pick the Split
// behavior, bit 3 invert, bit 4 the mode. Mode 0: the rest is "PATTERN\0TEXT"; the pattern is
// compiled by Oniguruma (refusal is fine) and splits the text, which must end (the retry limit
// bounds catastrophic patterns) and, for Isolated without invert, give back exactly the text.
// Mode 1: the rest is text; the GPT-2, Llama-3 and Qwen2 scanners must find exactly Oniguruma's
// pieces on it.
#include "core/error.hpp"
#include "model/onig_regex.hpp"
#include "model/pre_tokenizer.hpp"
#include "model/pre_tokenizer_split.hpp"
#include "model/unicode.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optkit::model;
  if (size == 0)
    return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 0x10) == 0) {
    const auto zero = rest.find('\0');
    if (zero == std::string_view::npos)
      return 0;
    static const char* const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                            "Contiguous"};
    const int behavior = (data[0] & 7) % 5;
    const bool invert = (data[0] & 8) != 0;
    try {
      const nlohmann::json node = {{"type", "Split"},
                                   {"pattern", {{"Regex", std::string(rest.substr(0, zero))}}},
                                   {"behavior", behaviors[behavior]},
                                   {"invert", invert}};
      const auto pre = PreTokenizer::from_json(node, "fuzz");
      const auto text = rest.substr(zero + 1);
      std::vector<std::string> words;
      pre.split(text, true, words);
      if (behavior == 1 && !invert) {
        std::string joined;
        for (const auto& w : words)
          joined += w;
        if (joined != text)
          std::abort(); // Isolated keeps every byte, in order
      }
    } catch (const optkit::InputError&) { // a pattern that does not compile, invalid UTF-8, retry limit
    }
    return 0;
  }
  try {
    const auto wide = decode_utf8(rest);
    for (const auto pattern : {SplitPattern::gpt2, SplitPattern::llama3, SplitPattern::qwen2}) {
      static const OnigRegex regexes[] = {OnigRegex(split_pattern_regex(SplitPattern::gpt2), "fuzz"),
                                          OnigRegex(split_pattern_regex(SplitPattern::llama3), "fuzz"),
                                          OnigRegex(split_pattern_regex(SplitPattern::qwen2), "fuzz")};
      const auto& regex = regexes[static_cast<int>(pattern)];
      std::vector<std::string> scanned, matched;
      for (const auto piece : split_text(pattern, wide))
        scanned.push_back(encode_utf8(piece));
      for (const auto& [start, end] : regex.find_all(rest))
        matched.emplace_back(rest.substr(start, end - start));
      if (scanned != matched)
        std::abort(); // the fast path must be exactly the regex
    }
  } catch (const optkit::InputError&) { // invalid UTF-8
  }
  return 0;
}
