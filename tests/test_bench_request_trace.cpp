// Request traces in the formats users replay: optkit's JSON lines, Mooncake's (FAST'25: times in
// milliseconds, prompt blocks as hash ids) and the Azure LLM inference trace's CSV, each found by
// its content; and prompts built from Mooncake block ids sharing exactly the prefixes the trace's
// requests shared (checked with tiny-base's own tokenizer).
#include "bench/prompt_synthesis.hpp"
#include "bench/request_trace.hpp"
#include "core/error.hpp"
#include "model/tokenizer.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

using namespace optkit::bench;

TEST_CASE("Mooncake rows: milliseconds become seconds, lengths and block ids are kept") {
  const std::string text = R"({"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1, 2]}
{"timestamp": 27482, "input_length": 1200, "output_length": 12, "hash_ids": [0, 1, 3]}
)";
  CHECK(detect_trace_format(text) == TraceFormat::mooncake);
  const auto rows = parse_request_trace(text, "mooncake_trace.jsonl");
  REQUIRE(rows.size() == 2);
  CHECK(rows[1].timestamp == doctest::Approx(27.482));
  CHECK(rows[0].input_tokens == 6755);
  CHECK(rows[0].output_tokens == 500);
  CHECK(rows[1].prefix_blocks == std::vector<std::int64_t>{0, 1, 3});
  // Read as optkit's own JSON lines, the same rows are in seconds and carry no blocks.
  const auto plain = parse_request_trace(text, "t.jsonl", TraceFormat::jsonl);
  CHECK(plain[1].timestamp == 27482);
  CHECK(plain[1].prefix_blocks.empty());
  CHECK_THROWS_WITH_AS(parse_request_trace(R"({"timestamp": 0, "hash_ids": [1, -2]}
{"timestamp": 1, "hash_ids": [1]})",
                                           "m.jsonl"),
                       doctest::Contains("m.jsonl:1: 'hash_ids' holds -2"), optkit::InputError);
}

TEST_CASE("Azure CSV rows: absolute times become seconds, columns in any order, CRLF lines") {
  const std::string text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                           "2023-11-16 18:15:46.6805900,374,44\r\n"
                           "2023-11-16 18:15:50.9951690,396,109\r\n"
                           "2023-11-17 00:00:00,1,0\r\n";
  CHECK(detect_trace_format(text) == TraceFormat::azure);
  const auto rows = parse_request_trace(text, "AzureLLMInferenceTrace_conv.csv");
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].timestamp - rows[0].timestamp == doctest::Approx(4.314579));
  CHECK(rows[2].timestamp - rows[0].timestamp == doctest::Approx(5 * 3600 + 44 * 60 + 13.31941));
  CHECK(rows[0].input_tokens == 374);
  CHECK(rows[1].output_tokens == 109);
  CHECK(rows[2].output_tokens == 1); // a request generates at least one token
  const auto reordered = parse_request_trace("GeneratedTokens,TIMESTAMP,ContextTokens\n"
                                             "7,2024-05-10 00:00:01,100\n8,2024-05-10 00:00:03.5,200\n",
                                             "week.csv");
  CHECK(reordered[1].timestamp - reordered[0].timestamp == doctest::Approx(2.5));
  CHECK(reordered[1].input_tokens == 200);
  CHECK_THROWS_WITH_AS(parse_request_trace("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,3\n", "a.csv"),
                       doctest::Contains("a.csv:1: the header names no 'GeneratedTokens' column"), optkit::InputError);
  CHECK_THROWS_WITH_AS(
      parse_request_trace("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,3,4\nnow,1,1\n", "b.csv"),
      doctest::Contains("b.csv:2: TIMESTAMP 'yesterday' is not a date and time"), optkit::InputError);
  CHECK_THROWS_WITH_AS(
      parse_request_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,-3,4\n", "c.csv"),
      doctest::Contains("c.csv:2: ContextTokens '-3' is not a token count"), optkit::InputError);
  CHECK(parse_trace_format("azure") == TraceFormat::azure);
  CHECK_THROWS_AS(parse_trace_format("sharegpt"), optkit::InputError);
}

TEST_CASE("prompts from Mooncake block ids share the blocks their ids share, at the trace's exact lengths") {
  const auto dir = optkit::test::tiny_base().string();
  const auto codec = local_codec(dir);
  const auto tokenizer = optkit::model::Tokenizer::load_folder(dir);
  PromptSynthesizer prompts(*codec, default_corpus_text(), 0, 7);
  const std::vector<std::int64_t> a_ids{4, 9, 2}, b_ids{4, 9, 7}, c_ids{5};
  const auto a = prompts.make_from_blocks(a_ids, 70, 32);
  const auto b = prompts.make_from_blocks(b_ids, 90, 32);
  const auto c = prompts.make_from_blocks(c_ids, 20, 32);
  for (const auto* p : {&a, &b, &c})
    CHECK(static_cast<std::int64_t>(tokenizer.encode(p->text, true).size()) == p->tokens);
  CHECK(a.tokens == 70);
  CHECK(b.tokens == 90);
  CHECK(c.tokens == 20);
  // a and b share blocks 4 and 9 (64 tokens): their texts agree well into them; c shares nothing.
  std::size_t common = 0;
  while (common < a.text.size() && common < b.text.size() && a.text[common] == b.text[common])
    ++common;
  const auto shared_tokens = tokenizer.encode(a.text.substr(0, common), false).size();
  CHECK(shared_tokens >= 60);
  CHECK(shared_tokens < 70);
  CHECK(a.text.substr(0, 20) != c.text.substr(0, 20));
}
