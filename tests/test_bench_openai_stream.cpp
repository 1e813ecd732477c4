#include "bench/openai_stream.hpp"

#include <doctest/doctest.h>

using namespace optkit::bench;

namespace {

const std::string completion_stream =
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"text\":\"Hel\",\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"text\":\"lo\",\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\n"
    "data: [DONE]\n\n";

} // namespace

TEST_CASE("a completions stream split anywhere gives the same chunks, usage and end") {
  for (std::size_t split = 1; split < completion_stream.size(); split += 7) {
    OpenAiStreamReader reader;
    CHECK(reader.feed(std::string_view(completion_stream).substr(0, split), 1.0));
    CHECK(reader.feed(std::string_view(completion_stream).substr(split), 2.0));
    CHECK(reader.done());
    CHECK(reader.error().empty());
    CHECK(reader.text_chunks() == 2);
    CHECK(reader.has_usage());
    CHECK(reader.prompt_tokens() == 7);
    CHECK(reader.completion_tokens() == 2);
    CHECK(reader.finish_reason() == "length");
  }
}

TEST_CASE("chat deltas count content, not the role chunk") {
  OpenAiStreamReader reader;
  reader.feed("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n", 0.5);
  CHECK(reader.first_text_time() < 0);
  reader.feed("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n", 0.75);
  reader.feed("data: [DONE]\n\n", 0.8);
  CHECK(reader.first_text_time() == 0.75);
  CHECK(reader.text_chunks() == 1);
  CHECK_FALSE(reader.has_usage());
}

TEST_CASE("malformed streams end as errors, never crashes") {
  const auto error_of = [](const std::string& bytes) {
    OpenAiStreamReader reader;
    reader.feed(bytes, 0);
    return reader.error();
  };
  CHECK(error_of("data: {not json\n\n").find("not a JSON object") != std::string::npos);
  CHECK(error_of("data: [1,2]\n\n").find("not a JSON object") != std::string::npos);
  CHECK(error_of("data: {\"error\":{\"message\":\"out of KV\"}}\n\n").find("out of KV") != std::string::npos);
  CHECK(error_of("data: [DONE]\n\ndata: {}\n\n").find("after [DONE]") != std::string::npos);
  CHECK(error_of(std::string(2u << 20, 'x')).find("malformed event stream") != std::string::npos);
  OpenAiStreamReader cut;
  cut.feed("data: {\"choices\":[{\"text\":\"a\"}]}\n\n", 0);
  CHECK_FALSE(cut.done()); // the caller turns this into "ended without [DONE]"
}
