// Tokenizer behaviour on hand-built tokenizer.json files (real ones are compared with the npm
// reference encoders in tests/conformance) and on the test models' tokenizer.
#include "core/error.hpp"
#include "model/pre_tokenizer_split.hpp"
#include "model/tokenizer.hpp"
#include "model/unicode.hpp"
#include "support/test_support.hpp"
#include "support/tokenizer_fixtures.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace optkit;
using namespace optkit::model;
using optkit::test::sentencepiece_json;
using optkit::test::with_byte_tokens;

namespace {

std::vector<std::string>
pieces(SplitPattern p, const std::u32string& text) {
  std::vector<std::string> out;
  for (const auto v : split_text(p, text))
    out.push_back(encode_utf8(v));
  return out;
}

} // namespace

TEST_CASE("the Llama-3 split keeps contractions, 3-digit groups and newline runs as the regex does") {
  CHECK(pieces(SplitPattern::llama3, U"I'M 12345 ok") == std::vector<std::string>{"I", "'M", " ", "123", "45", " ok"});
  CHECK(pieces(SplitPattern::llama3, U"a  \n\n  b") == std::vector<std::string>{"a", "  \n\n", " ", " b"});
  CHECK(pieces(SplitPattern::llama3, U"x...\n\ny") == std::vector<std::string>{"x", "...\n\n", "y"});
  CHECK(pieces(SplitPattern::qwen2, U"12345") == std::vector<std::string>{"1", "2", "3", "4", "5"});
  CHECK(pieces(SplitPattern::gpt2, U"Hello   world's") == std::vector<std::string>{"Hello", "  ", " world", "'s"});
  CHECK(pieces(SplitPattern::gpt2, U"I'M") == std::vector<std::string>{"I", "'", "M"}); // case-sensitive
}

TEST_CASE("SentencePiece-style BPE: metaspace, merges, byte fallback, template and decode") {
  const auto tok = Tokenizer::parse(with_byte_tokens(sentencepiece_json()).dump(), "sp.json");
  CHECK(tok.encode("hi", false) == std::vector<std::int32_t>{5});
  CHECK(tok.encode("hi", true) == std::vector<std::int32_t>{262, 5});
  // 'é' is not in the vocabulary: its two UTF-8 bytes fall back to <0xC3> <0xA9>
  CHECK(tok.encode("hi\u00e9", false) == std::vector<std::int32_t>{5, 6 + 0xc3, 6 + 0xa9});
  CHECK(tok.decode(tok.encode("hi hi\u00e9", false)) == "hi hi\u00e9");
  CHECK(tok.decode(tok.encode("hi", true), true) == "hi");
  CHECK(tok.vocab_size() == 263);
}

TEST_CASE("a Sequence post-processor of ByteLevel and TemplateProcessing adds the template's tokens") {
  auto j = with_byte_tokens(sentencepiece_json());
  const auto template_step = j["post_processor"];
  j["post_processor"] = {{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}}, template_step}}};
  const auto tok = Tokenizer::parse(j.dump(), "sequence.json");
  CHECK(tok.encode("hi", true) == std::vector<std::int32_t>{262, 5});
  CHECK(tok.encode("hi", false) == std::vector<std::int32_t>{5});
  // each processor of a Sequence adds its tokens in turn, as Hugging Face's Sequence does
  j["post_processor"]["processors"].push_back(template_step);
  CHECK(Tokenizer::parse(j.dump(), "sequence.json").encode("hi", true) == std::vector<std::int32_t>{262, 262, 5});
}

TEST_CASE("Metaspace pre-tokenizer: prepend on the first segment only, split before each metaspace") {
  auto j = with_byte_tokens(sentencepiece_json());
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", true}};
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}};
  const auto tok = Tokenizer::parse(j.dump(), "meta.json");
  CHECK(tok.encode("hi hi", false) == std::vector<std::int32_t>{5, 5});
  // after an added token the next segment gets no metaspace prepended: "hi" stays h+i -> "hi" (4)
  CHECK(tok.encode("hi<s>hi", false) == std::vector<std::int32_t>{5, 262, 4});
  CHECK(tok.decode(tok.encode("hi hi", false)) == "hi hi");
}

TEST_CASE("unsupported tokenizer.json parts are refused by name") {
  auto j = with_byte_tokens(sentencepiece_json());
  j["model"]["type"] = "WordLevel";
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"), doctest::Contains("model 'WordLevel' is not supported"),
                       InputError);
  j = with_byte_tokens(sentencepiece_json());
  j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"),
                       doctest::Contains("pre_tokenizer 'UnicodeScripts' is not supported"), InputError);
  j = with_byte_tokens(sentencepiece_json());
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"), doctest::Contains("regex '(unclosed' does not compile"),
                       InputError);
  j = with_byte_tokens(sentencepiece_json());
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Sideways"}};
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"), doctest::Contains("behavior 'Sideways'"), InputError);
  j = with_byte_tokens(sentencepiece_json());
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"),
                       doctest::Contains("normalizer 'Precompiled' is not supported"), InputError);
  j = with_byte_tokens(sentencepiece_json());
  j["model"]["merges"] = {"h zz"};
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"), doctest::Contains("missing from the vocabulary"),
                       InputError);
  j = with_byte_tokens(sentencepiece_json());
  j["post_processor"] = {{"type", "Sequence"},
                         {"processors", {{{"type", "ByteLevel"}}, {{"type", "BlendProcessing"}}}}};
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"),
                       doctest::Contains("post_processor 'BlendProcessing' is not supported"), InputError);
  j = with_byte_tokens(sentencepiece_json());
  j["decoder"] = {{"type", "CTC"}};
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"), doctest::Contains("decoder 'CTC' is not supported"),
                       InputError);
  CHECK_THROWS_WITH_AS(Tokenizer::parse("{", "t.json"), doctest::Contains("t.json: not valid JSON"), InputError);
}

TEST_CASE("a field of the wrong type is bad input naming the file and the field, not an internal error") {
  auto j = with_byte_tokens(sentencepiece_json());
  j["post_processor"]["single"][0]["SpecialToken"]["id"] = 7; // a token name must be a string
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"),
                       doctest::Contains("t.json: field /post_processor/single/0/SpecialToken/id: type must be string"),
                       InputError);
  j = with_byte_tokens(sentencepiece_json());
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", 5}};
  CHECK_THROWS_WITH_AS(Tokenizer::parse(j.dump(), "t.json"), doctest::Contains("t.json: field /pre_tokenizer"),
                       InputError);
}

TEST_CASE("the test models' byte-level tokenizer round-trips text and splits on special tokens") {
  const auto tok = Tokenizer::load_folder(test::testdata_dir() / "models" / "tiny-base");
  const std::string text = "Debian's apt-get installs 1234 packages.\n\n\tcaf\u00e9 \U0001F600";
  const auto ids = tok.encode(text, false);
  CHECK(tok.decode(ids) == text);
  const auto bos = tok.token_id("<|begin_of_text|>");
  REQUIRE(bos);
  CHECK(tok.encode("x", true).front() == *bos);
  const auto with_special = tok.encode("a<|eot_id|>b", false);
  CHECK(std::find(with_special.begin(), with_special.end(), *tok.token_id("<|eot_id|>")) != with_special.end());
  std::size_t bytes = 0;
  for (const auto id : ids)
    bytes += tok.token_bytes(id).size();
  CHECK(bytes == text.size());
  CHECK_THROWS_AS(tok.encode("bad \xff utf8", false), InputError);
}
