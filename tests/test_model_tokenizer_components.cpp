// The tokenizer.json components on their own, against the examples Hugging Face documents for
// them (the transformers.js oracle of tests/conformance diverges from Hugging Face on some of these:
// split behaviors, non-ASCII digits, Unigram unknowns and byte fallback). And the hand-written
// pre-tokenizer scanners against Oniguruma on random text: they must find the same pieces.
#include "core/error.hpp"
#include "model/normalizer.hpp"
#include "model/onig_regex.hpp"
#include "model/pre_tokenizer.hpp"
#include "model/pre_tokenizer_split.hpp"
#include "model/tokenizer.hpp"
#include "model/unicode.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include <random>

using namespace optkit;
using namespace optkit::model;
using nlohmann::json;

namespace {

std::vector<std::string>
pre_tokenize(const json& node, std::string_view text, bool first = true) {
  std::vector<std::string> words;
  PreTokenizer::from_json(node, "t.json").split(text, first, words);
  return words;
}

std::string
normalize(const json& node, std::string_view text) {
  return Normalizer::from_json(node, "t.json").apply(text);
}

using Words = std::vector<std::string>;

} // namespace

TEST_CASE("Split: every delimiter behavior, as Hugging Face documents them on \"the-final--countdown\"") {
  const auto split = [](const char* behavior) {
    return pre_tokenize({{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}},
                        "the-final--countdown");
  };
  CHECK(split("Removed") == Words{"the", "final", "countdown"});
  CHECK(split("Isolated") == Words{"the", "-", "final", "-", "-", "countdown"});
  CHECK(split("MergedWithPrevious") == Words{"the-", "final-", "-", "countdown"});
  CHECK(split("MergedWithNext") == Words{"the", "-final", "-", "-countdown"});
  CHECK(split("Contiguous") == Words{"the", "-", "final", "--", "countdown"});
}

TEST_CASE("Split with a regex: invert keeps the matches' complement as the delimiters") {
  const json inverted = {
      {"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Removed"}, {"invert", true}};
  CHECK(pre_tokenize(inverted, "Hey, man!") == Words{"Hey", "man"});
  const json regex = {{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}{1,3}"}}}, {"behavior", "Isolated"}};
  CHECK(pre_tokenize(regex, "a12345b") == Words{"a", "123", "45", "b"});
  // a string pattern is literal, never a regex
  CHECK(pre_tokenize({{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "Removed"}}, "a.b|c") ==
        Words{"a", "b|c"});
}

TEST_CASE("Whitespace, WhitespaceSplit, Punctuation, Digits and BertPreTokenizer") {
  CHECK(pre_tokenize({{"type", "Whitespace"}}, "Hey man!") == Words{"Hey", "man", "!"});
  CHECK(pre_tokenize({{"type", "Whitespace"}}, "How are you doing?") == Words{"How", "are", "you", "doing", "?"});
  CHECK(pre_tokenize({{"type", "WhitespaceSplit"}}, "Hey man!\u00a0x\u0085y") == Words{"Hey", "man!", "x", "y"});
  CHECK(pre_tokenize({{"type", "Punctuation"}}, "Hey!! you?") == Words{"Hey", "!", "!", " you", "?"});
  CHECK(pre_tokenize({{"type", "Punctuation"}, {"behavior", "Contiguous"}}, "Hey!! you?") ==
        Words{"Hey", "!!", " you", "?"});
  CHECK(pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "Call 123 please") ==
        Words{"Call ", "123", " please"});
  CHECK(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}}, "Call 123 please") ==
        Words{"Call ", "1", "2", "3", " please"});
  // \p{N}: Arabic-Indic digits and superscripts are numbers too
  CHECK(pre_tokenize({{"type", "Digits"}}, "x\u0661\u0662\u00b2y") == Words{"x", "\u0661\u0662\u00b2", "y"});
  CHECK(pre_tokenize({{"type", "BertPreTokenizer"}}, "Hey friend!  How are you?!?") ==
        Words{"Hey", "friend", "!", "How", "are", "you", "?", "!", "?"});
}

TEST_CASE("Metaspace: replacement, prepend schemes, split; ByteLevel with and without its regex") {
  const json meta = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  CHECK(pre_tokenize(meta, "Hey   friend!") == Words{"\u2581Hey", "\u2581", "\u2581", "\u2581friend!"});
  auto first = meta;
  first["prepend_scheme"] = "first";
  CHECK(pre_tokenize(first, "Hey you", false) == Words{"Hey", "\u2581you"});
  auto whole = meta;
  whole["split"] = false;
  CHECK(pre_tokenize(whole, "Hey you") == Words{"\u2581Hey\u2581you"});
  // ByteLevel maps bytes to printable characters: space -> U+0120 (Ġ), newline -> U+010A (Ċ)
  CHECK(pre_tokenize({{"type", "ByteLevel"}, {"add_prefix_space", false}}, "Hi you\n") ==
        Words{"Hi", "\u0120you", "\u010a"});
  CHECK(pre_tokenize({{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}}, "Hi you") ==
        Words{"\u0120Hi\u0120you"});
}

TEST_CASE("normalizers: Unicode forms, Lowercase, Strip, StripAccents, Replace with a regex, BertNormalizer") {
  CHECK(normalize({{"type", "NFKC"}}, "\ufb01 \u2460 \uff21") == "fi 1 A");
  CHECK(normalize({{"type", "NFKD"}}, "\u00e9") == "e\u0301");
  CHECK(normalize({{"type", "NFD"}}, "\u00e9\ufb01") == "e\u0301\ufb01"); // canonical only
  CHECK(normalize({{"type", "NFC"}}, "e\u0301") == "\u00e9");
  CHECK(normalize({{"type", "Lowercase"}}, "HeLLo \u0130 \u03a3") == "hello i\u0307 \u03c3");
  CHECK(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "  x  ") == "x  ");
  // StripAccents removes every combining mark (M*): after NFD, the accents of "é" and U+0903 (Mc)
  CHECK(normalize({{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}}}},
                  "\u00e9t\u00e9 \u0915\u0903") == "ete \u0915");
  CHECK(normalize({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}, "a   b  c d") ==
        "a b c d");
  CHECK(normalize({{"type", "Prepend"}, {"prepend", "\u2581"}}, "") == "");
  const json bert = {{"type", "BertNormalizer"},
                     {"clean_text", true},
                     {"handle_chinese_chars", true},
                     {"strip_accents", nullptr},
                     {"lowercase", true}};
  CHECK(normalize(bert, "H\u00e9llo\tW\x01orld\u4e2d!") == "hello world \u4e2d !");
}

namespace {

json
unigram(bool byte_fallback) {
  json vocab = json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.0}), json::array({"b", -1.0}),
                            json::array({"ab", -1.5}), json::array({"abc", -10.0}), json::array({"c", -1.0})});
  if (byte_fallback)
    for (int b = 0; b < 256; ++b)
      vocab.push_back(json::array({fmt::format("<0x{:02X}>", b), 0.0}));
  return {{"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}, {"byte_fallback", byte_fallback}}}};
}

} // namespace

TEST_CASE("Unigram: the most probable segmentation; unknown characters fused into one unk, or their bytes") {
  const auto tok = Tokenizer::parse(unigram(false).dump(), "u.json");
  CHECK(tok.encode("ab") == std::vector<std::int32_t>{3});                   // ab (-1.5) beats a + b (-2)
  CHECK(tok.encode("abc") == std::vector<std::int32_t>{3, 5});               // ab + c (-2.5) beats abc (-10)
  CHECK(tok.encode("a\u00e9\u00e8b") == std::vector<std::int32_t>{1, 0, 2}); // é è fuse into one unk
  const auto bytes = Tokenizer::parse(unigram(true).dump(), "u.json");
  // é is 0xC3 0xA9: ids 6 + 0xC3, 6 + 0xA9
  CHECK(bytes.encode("a\u00e9") == std::vector<std::int32_t>{1, 6 + 0xC3, 6 + 0xA9});
}

TEST_CASE("WordPiece: longest match first with ## continuations; an unmatchable word is [UNK]") {
  const json j = {{"model",
                   {{"type", "WordPiece"},
                    {"unk_token", "[UNK]"},
                    {"vocab", {{"[UNK]", 0}, {"un", 1}, {"##aff", 2}, {"##able", 3}, {"u", 4}, {"##n", 5}}}}},
                  {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
                  {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}}};
  const auto tok = Tokenizer::parse(j.dump(), "wp.json");
  CHECK(tok.encode("unaffable") == std::vector<std::int32_t>{1, 2, 3});
  CHECK(tok.encode("unaffable xyz") == std::vector<std::int32_t>{1, 2, 3, 0});
  CHECK(tok.decode(tok.encode("unaffable unaffable")) == "unaffable unaffable");
}

TEST_CASE("BPE with a continuing-subword prefix: merged tokens drop the right side's prefix") {
  const json j = {{"model",
                   {{"type", "BPE"},
                    {"continuing_subword_prefix", "##"},
                    {"vocab", {{"a", 0}, {"##b", 1}, {"##c", 2}, {"ab", 3}, {"abc", 4}}},
                    {"merges", {"a ##b", "ab ##c"}}}}};
  const auto tok = Tokenizer::parse(j.dump(), "bpe.json");
  CHECK(tok.encode("ab") == std::vector<std::int32_t>{3});
  CHECK(tok.encode("abc") == std::vector<std::int32_t>{4});
}

TEST_CASE("added tokens: single_word, lstrip/rstrip, and normalized ones matched after normalization") {
  json j = {{"model", {{"type", "WordPiece"}, {"vocab", {{"[UNK]", 0}, {"x", 1}, {"hi", 2}}}}},
            {"normalizer", {{"type", "Lowercase"}}},
            {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
            {"added_tokens",
             {{{"id", 10}, {"content", "[M]"}, {"special", true}, {"lstrip", true}, {"rstrip", true}},
              {{"id", 11}, {"content", "yo"}, {"special", false}, {"single_word", true}, {"normalized", false}},
              {{"id", 12}, {"content", "HEY"}, {"special", false}, {"normalized", true}}}}};
  const auto tok = Tokenizer::parse(j.dump(), "added.json");
  CHECK(tok.encode("x [M] x") == std::vector<std::int32_t>{1, 10, 1});
  CHECK(tok.encode("yo x") == std::vector<std::int32_t>{11, 1});
  CHECK(tok.encode("yoyo") == std::vector<std::int32_t>{0}); // inside a word: not the added token
  // "HEY" is normalized ("hey"), so it matches "hey" and "Hey" after lowercasing
  CHECK(tok.encode("Hey hi") == std::vector<std::int32_t>{12, 2});
}

TEST_CASE("Oniguruma: bounded matching and the onig crate's empty-match stepping") {
  OnigRegex empty("x*", "t");
  CHECK(empty.find_all("axb") == std::vector<std::pair<std::size_t, std::size_t>>{{0, 0}, {1, 2}, {3, 3}});
  OnigRegex catastrophic("(a|aa)+$", "t");
  CHECK_THROWS_WITH_AS(catastrophic.find_all(std::string(60, 'a') + "b"),
                       doctest::Contains("matching the regex failed"), InputError);
}

TEST_CASE("the GPT-2, Llama-3 and Qwen2 scanners find exactly Oniguruma's matches on random text") {
  const std::u32string alphabet =
      U"aZé中한 \t\n\r'sSmMlLdDtTvVrReE0123456789٣²!?.,-_$+<«ſKİ\ufb05\ufb06\u00a0\u3000\u0301😀";
  std::mt19937 rng(7);
  for (const auto pattern : {SplitPattern::gpt2, SplitPattern::llama3, SplitPattern::qwen2}) {
    OnigRegex regex(split_pattern_regex(pattern), "t");
    for (int round = 0; round < 400; ++round) {
      std::u32string text;
      const auto length = rng() % 40;
      for (std::uint32_t i = 0; i < length; ++i)
        text.push_back(alphabet[rng() % alphabet.size()]);
      std::vector<std::string> scanned;
      for (const auto piece : split_text(pattern, text))
        scanned.push_back(encode_utf8(piece));
      const auto utf8 = encode_utf8(text);
      std::vector<std::string> matched;
      for (const auto& [start, end] : regex.find_all(utf8))
        matched.push_back(utf8.substr(start, end - start));
      INFO(split_pattern_name(pattern), " on ", utf8);
      REQUIRE(scanned == matched);
    }
  }
}
