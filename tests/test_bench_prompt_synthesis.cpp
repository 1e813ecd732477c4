// Prompts of exact token counts, checked against the model's own tokenizer (tiny-base's
// tokenizer.json through optkit's tokenizer, which the tokenizer tests pin to Hugging Face's).
#include "bench/prompt_synthesis.hpp"
#include "bench/serving_profile.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "http/client.hpp"
#include "http/server.hpp"
#include "model/tokenizer.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace optkit::bench;

TEST_CASE("synthesized prompts have exactly the token count the server will see, BOS included") {
  const auto dir = optkit::test::tiny_base().string();
  const auto codec = local_codec(dir);
  const auto tokenizer = optkit::model::Tokenizer::load_folder(dir);
  const std::int64_t special = static_cast<std::int64_t>(tokenizer.encode("", true).size());
  CHECK(codec->added_special_tokens() == special);
  PromptSynthesizer prompts(*codec, default_corpus_text(), 0, 7);
  int exact = 0;
  for (std::int64_t n : {2, 3, 8, 17, 64, 100, 255, 512, 1000}) {
    CAPTURE(n);
    const auto prompt = prompts.make(n);
    const auto counted = static_cast<std::int64_t>(tokenizer.encode(prompt.text, true).size());
    CHECK(counted == prompt.tokens);
    exact += counted == n ? 1 : 0;
  }
  CHECK(exact == 9);
  // A shared prefix is the same leading text in every prompt.
  PromptSynthesizer shared(*codec, default_corpus_text(), 32, 7);
  const auto a = shared.make(100), b = shared.make(120);
  const auto ids = tokenizer.encode(a.text, false);
  REQUIRE(ids.size() > 32);
  const auto prefix = tokenizer.decode(std::vector<std::int32_t>(ids.begin(), ids.begin() + 32));
  CHECK(b.text.rfind(prefix.substr(0, prefix.size() / 2), 0) == 0);
  CHECK(a.text != b.text);
}

namespace {

// A server whose /detokenize text always counts back to an odd number of tokens: no prompt of an
// even count ever comes out exact, so every one takes all its retries.
class DriftingCodec final : public TokenCodec {
public:
  std::vector<std::int32_t> encode(const std::string& text) const override {
    return std::vector<std::int32_t>(text.size() / 2, 1);
  }
  std::string decode(const std::vector<std::int32_t>& ids) const override {
    return std::string(ids.size() * 4 + 2, 'a');
  }
  std::string source() const override { return "server /tokenize"; }
  std::int64_t added_special_tokens() const override { return 0; }
};

} // namespace

TEST_CASE(
    "a codec that never round-trips exhausts the batch's budget: exit 3 naming the round trip; reseed renews it") {
  const DriftingCodec codec;
  PromptSynthesizer prompts(codec, std::string(400, 'a'), 0, 1, {.max_round_trips = 20, .max_seconds = 3600});
  CHECK(prompts.make(10).tokens % 2 == 1); // the closest it got
  CHECK(prompts.make(10).tokens % 2 == 1);
  CHECK(prompts.make(10).tokens % 2 == 1);
  try {
    prompts.make(10);
    FAIL("no budget error");
  } catch (const optkit::RuntimeFailure& e) {
    CHECK(e.code() == optkit::ExitCode::runtime);
    CHECK(std::string(e.what()).find("prompt synthesis through server /tokenize ran past its budget (20 decode/encode "
                                     "round trips") != std::string::npos);
    CHECK(std::string(e.what()).find("--tokenizer DIR") != std::string::npos);
  }
  prompts.reseed(2);
  CHECK(prompts.make(10).tokens % 2 == 1);
}

TEST_CASE("Ctrl-C stops prompt synthesis at its next round trip") {
  const DriftingCodec codec;
  PromptSynthesizer prompts(codec, std::string(400, 'a'), 0, 1);
  optkit::request_interrupt(2);
  CHECK_THROWS_AS(prompts.make(10), optkit::Interrupted);
  optkit::reset_interrupt();
  CHECK(prompts.make(10).tokens % 2 == 1);
}

namespace {

// A loopback server speaking one /tokenize dialect, a token per byte: llama-server's (GET /props
// with a build_info; "content" and "add_special" in; /detokenize's text as "content") or vLLM's
// (no /props; "prompt" and "add_special_tokens"; /detokenize's text as "prompt"). A request in the
// other dialect gets no tokens, as llama-server gives for a body without "content".
class DialectServer {
public:
  explicit DialectServer(bool llamacpp)
      : m_server(optkit::http::ServerOptions{}, [llamacpp](const optkit::http::Request& request,
                                                           const std::shared_ptr<optkit::http::Exchange>& exchange) {
        const auto body = nlohmann::json::parse(request.body.empty() ? "{}" : request.body);
        const char* text_key = llamacpp ? "content" : "prompt";
        const char* special_key = llamacpp ? "add_special" : "add_special_tokens";
        nlohmann::json answer;
        if (request.path() == "/props" && llamacpp) {
          answer = {{"build_info", "b7012-3f545be"}, {"total_slots", 4}};
        } else if (request.path() == "/tokenize") {
          const auto text = body.value(text_key, std::string());
          std::vector<int> tokens(body.value(special_key, false) ? 1 : 0, 1); // a BOS
          for (const char c : text)
            tokens.push_back(static_cast<unsigned char>(c));
          answer = {{"tokens", tokens}};
        } else if (request.path() == "/detokenize") {
          std::string text;
          for (const auto& id : body.at("tokens"))
            text += static_cast<char>(id.get<int>());
          answer = {{text_key, text}};
        } else {
          exchange->respond(404, "application/json", R"({"error": "not found"})");
          return;
        }
        exchange->respond(200, "application/json", answer.dump());
      }) {
    m_server.start();
  }
  ~DialectServer() { m_server.stop(std::chrono::milliseconds(0)); }
  optkit::http::Url url() const {
    return optkit::http::parse_url("http://127.0.0.1:" + std::to_string(m_server.port()));
  }

private:
  optkit::http::Server m_server;
};

} // namespace

TEST_CASE("a server's /tokenize is spoken in its dialect: llama-server's found by its /props, vLLM's otherwise") {
  for (const bool llamacpp : {true, false}) {
    CAPTURE(llamacpp);
    DialectServer server(llamacpp);
    optkit::http::Client client(server.url());
    const auto codec = server_codec(client, "m");
    CHECK(codec->encode("abc") == std::vector<std::int32_t>{97, 98, 99});
    CHECK(codec->decode({104, 105}) == "hi");
    CHECK(codec->added_special_tokens() == 1);
    CHECK((codec->source().find("llama-server") != std::string::npos) == llamacpp);
  }
}
