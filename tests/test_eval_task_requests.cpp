// Requests against a live loopback server: retries with backoff on 429 and 5xx, a 4xx refusal
// named at once, the response cache answering a second run without the server, and concurrency.
#include "core/error.hpp"
#include "eval/response_cache.hpp"
#include "eval/task_requests.hpp"
#include "http/server.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <unistd.h>

using namespace optkit;
using namespace optkit::eval;

namespace {

// Answers "echo: <prompt>"; a prompt starting "flaky" gets 429 and then 503 before its answer.
class CompletionServer {
public:
  CompletionServer()
      : m_server(http::ServerOptions{},
                 [this](const http::Request& request, const std::shared_ptr<http::Exchange>& ex) {
                   ++requests;
                   const auto body = nlohmann::json::parse(request.body);
                   const std::string prompt = body.value("prompt", "");
                   int seen = 0;
                   {
                     std::lock_guard lock(m_mutex);
                     seen = m_seen[prompt]++;
                   }
                   if (prompt.rfind("flaky", 0) == 0 && seen < 2) {
                     ex->respond(seen == 0 ? 429 : 503, "application/json", R"({"error": {"message": "busy"}})");
                     return;
                   }
                   if (prompt == "bad") {
                     ex->respond(400, "application/json", R"({"error": {"message": "'max_tokens' must be positive"}})");
                     return;
                   }
                   const nlohmann::json out = {{"choices", {{{"text", "echo: " + prompt}, {"finish_reason", "stop"}}}},
                                               {"usage", {{"completion_tokens", 2}}}};
                   ex->respond(200, "application/json", out.dump());
                 }) {
    m_server.start();
  }
  ~CompletionServer() { m_server.stop(std::chrono::milliseconds(0)); }
  EndpointTarget target() const {
    return {http::parse_url("http://127.0.0.1:" + std::to_string(m_server.port())), "m", {}, "test-model"};
  }
  std::atomic<int> requests{0};

private:
  std::mutex m_mutex;
  std::map<std::string, int> m_seen;
  http::Server m_server;
};

std::vector<nlohmann::json>
bodies(const std::vector<std::string>& prompts) {
  std::vector<nlohmann::json> out;
  for (const auto& p : prompts)
    out.push_back({{"prompt", p}, {"max_tokens", 4}});
  return out;
}

} // namespace

TEST_CASE("retries 429 and 5xx with backoff, in order, with concurrency") {
  CompletionServer server;
  RequestOptions options;
  options.backoff_s = 0.001;
  options.concurrency = 4;
  const auto out = generate_all(server.target(), "/v1/completions", bodies({"a", "flaky b", "c", "d", "e"}), options);
  REQUIRE(out.size() == 5);
  CHECK(out[0].text == "echo: a");
  CHECK(out[1].text == "echo: flaky b");
  CHECK(out[1].attempts == 3);
  CHECK(out[4].completion_tokens == 2);
  CHECK(server.requests == 7);
}

TEST_CASE("retries run out: the run fails naming the item and the last status") {
  CompletionServer server;
  RequestOptions options;
  options.backoff_s = 0.001;
  options.max_retries = 1;
  CHECK_THROWS_WITH_AS(generate_all(server.target(), "/v1/completions", bodies({"flaky x"}), options),
                       doctest::Contains("HTTP 503: busy (after 2 attempts)"), RuntimeFailure);
}

TEST_CASE("a 400 is not retried: the server's message is quoted") {
  CompletionServer server;
  RequestOptions options;
  CHECK_THROWS_WITH_AS(generate_all(server.target(), "/v1/completions", bodies({"ok", "bad"}), options),
                       doctest::Contains("'max_tokens' must be positive"), InputError);
}

TEST_CASE("the cache answers a second run; a --repeat pass asks again and keeps the cache fresh") {
  const auto folder = std::filesystem::temp_directory_path() / ("optkit_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(folder);
  const ResponseCache cache(folder);
  CompletionServer server;
  RequestOptions options;
  options.cache = &cache;
  const auto first = generate_all(server.target(), "/v1/completions", bodies({"a", "b"}), options);
  CHECK(server.requests == 2);
  const auto second = generate_all(server.target(), "/v1/completions", bodies({"a", "b"}), options);
  CHECK(server.requests == 2);
  CHECK(second[0].cached);
  CHECK(second[1].text == "echo: b");
  options.read_cache = false;
  generate_all(server.target(), "/v1/completions", bodies({"a"}), options);
  CHECK(server.requests == 3);
  auto other = server.target();
  other.identity = "another-model"; // same request, another model: a miss
  options.read_cache = true;
  generate_all(other, "/v1/completions", bodies({"a"}), options);
  CHECK(server.requests == 4);
  std::filesystem::remove_all(folder);
}

TEST_CASE("responses without choices are failures, not empty answers") {
  CHECK_THROWS_AS(parse_generation(R"({"object": "error"})"), RuntimeFailure);
  CHECK(parse_generation(R"({"choices": [{"message": {"role": "assistant", "content": "hi"}}]})").text == "hi");
  CHECK(parse_generation(R"({"choices": [{"message": {"role": "assistant", "content": null}}]})").text.empty());
}

TEST_CASE("a local model's cache identity changes with its files and with the bf16 activation mode") {
  const auto dir = test::testdata_dir() / "models" / "tiny-base";
  const auto fp32 = local_model_identity(dir, {});
  CHECK(fp32.rfind("local:", 0) == 0);
  CHECK(local_model_identity(dir, {}, "fp32") == fp32); // the default keeps caches made before the mode existed
  CHECK(local_model_identity(dir, {}, "bf16") != fp32); // answers differ, so they must not be served from it
  CHECK(local_model_identity(test::testdata_dir() / "models" / "tiny-code", {}) != fp32);
}
