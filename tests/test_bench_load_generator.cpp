// The load generator and the asynchronous client against a scripted OpenAI-style server on
// loopback: what each request records, and every fault a real server can throw at it (429
// storms, malformed SSE, a stream without [DONE], one that hangs, a refused port) recorded as a
// request error, never a hang or a crash. Nothing here asserts a speed.
#include "bench/load_generator.hpp"
#include "bench/trial_summary.hpp"
#include "http/async_client.hpp"
#include "http/server.hpp"
#include "support/scripted_server.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

using namespace optkit;
using namespace optkit::bench;
using namespace std::chrono_literals;

using optkit::test::ScriptedServer;

namespace {

PreparedRequest
request(const std::string& prompt, int tokens) {
  return {nlohmann::json{{"prompt", prompt}, {"max_tokens", tokens}, {"stream", true}}.dump(), 3, tokens};
}

} // namespace

TEST_CASE("open loop: every request is recorded with its schedule, chunks and the server's usage") {
  ScriptedServer server(4, 200us);
  LoadGenerator generator({server.url()});
  std::vector<double> offsets;
  for (int i = 0; i < 200; ++i)
    offsets.push_back(i * 0.002);
  const auto recording = generator.open_loop({request("ok", 5), request("ok", 3)}, offsets);
  REQUIRE(recording.requests.size() == 200);
  for (const auto& r : recording.requests) {
    CAPTURE(r.error);
    REQUIRE(r.ok());
    CHECK(r.sent >= r.intended);
    CHECK(r.first_token >= r.sent);
    CHECK(r.end >= r.first_token);
    CHECK(r.usage_reported);
    CHECK(r.input_tokens == 11);
    CHECK(r.output_tokens == (r.index % 2 == 0 ? 5 : 3));
    CHECK(r.chunk_times.size() == static_cast<std::size_t>(r.output_tokens));
    CHECK(r.tpot() >= 0);
  }
  CHECK(server.served == 200);
}

TEST_CASE("closed loop keeps exactly `concurrency` requests in flight and sends exactly `count`") {
  ScriptedServer server(2, 100us);
  LoadGenerator generator({server.url()});
  const auto recording = generator.closed_loop({request("ok", 2)}, 50, 2);
  REQUIRE(recording.requests.size() == 50);
  for (const auto& r : recording.requests)
    CHECK(r.ok());
  // With two streams, a request's intended time is when an earlier one ended: never more than
  // two are in flight at once.
  for (const auto& r : recording.requests) {
    int overlapping = 0;
    for (const auto& other : recording.requests)
      overlapping += other.intended <= r.intended && other.end > r.intended ? 1 : 0;
    CHECK(overlapping <= 2);
  }
  CHECK(server.served == 50);
}

TEST_CASE("faults become request errors with their cause, and the trial ends") {
  ScriptedServer server(4, 100us);
  GeneratorOptions options{server.url()};
  options.request_timeout_s = 1.0; // for the request that hangs
  LoadGenerator generator(options);
  const auto recording = generator.open_loop(
      {request("ok", 2), request("429", 2), request("nodone", 2), request("garbage", 2), request("hang", 2)},
      {0, 0.001, 0.002, 0.003, 0.004});
  REQUIRE(recording.requests.size() == 5);
  const auto& r = recording.requests;
  CHECK(r[0].ok());
  CHECK(r[1].error.find("HTTP 429: server overloaded") != std::string::npos);
  CHECK(r[2].error.find("without data: [DONE]") != std::string::npos);
  CHECK(r[3].error.find("not a JSON object") != std::string::npos);
  CHECK(r[4].error.find("timed out") != std::string::npos);
  SummaryOptions summary;
  summary.warmup_fraction = summary.cooldown_fraction = 0;
  summary.max_dispatch_lag_s = 60; // on a busy (or sanitized) machine the lag check would speak first
  const auto t = summarize_trial(recording, summary);
  CHECK(t.failed == 4);
  CHECK(t.errors.size() == 4);
  CHECK(t.failure.find("error rate 80.0 %") != std::string::npos);
}

TEST_CASE("an unreachable endpoint fails each request at once with the connect error") {
  std::uint16_t port = 0;
  { // a port that was free a moment ago
    ScriptedServer probe(1, 1us);
    port = static_cast<std::uint16_t>(probe.url().port);
  }
  LoadGenerator generator({http::parse_url("http://127.0.0.1:" + std::to_string(port))});
  const auto recording = generator.open_loop({request("ok", 1)}, {0, 0, 0});
  REQUIRE(recording.requests.size() == 3);
  for (const auto& r : recording.requests)
    CHECK(r.error.find("connect") != std::string::npos);
}

TEST_CASE("the async client reuses kept-alive connections and caps how many it opens") {
  ScriptedServer server(8, 50us);
  http::AsyncClientOptions options;
  options.max_connections = 3;
  http::AsyncClient client(server.url(), options);
  std::atomic<int> done{0}, ok{0};
  for (int i = 0; i < 60; ++i) {
    http::AsyncHandlers handlers;
    handlers.on_data = [](std::string_view) { return true; };
    handlers.on_done = [&](http::AsyncResult result) {
      ok += result.error.empty() && result.status == 200 ? 1 : 0;
      ++done;
    };
    client.submit({"POST", "/v1/completions", request("ok", 1).body}, std::move(handlers));
  }
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (done < 60 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(done == 60);
  CHECK(ok == 60);
  CHECK(client.open_connections() <= 3);
  CHECK(client.in_flight() == 0);
}

TEST_CASE("the async client opens connections a few at a time, and waiting requests take the next one opened") {
  // One connect at a time: the waiting requests must not wait for a request to finish (100 ms
  // each here) but go out on each connection as it opens, so the pool still grows past one.
  ScriptedServer server(8, 20ms);
  http::AsyncClientOptions options;
  options.max_connections = 8;
  options.max_opening = 1;
  http::AsyncClient client(server.url(), options);
  std::atomic<int> done{0}, ok{0};
  for (int i = 0; i < 16; ++i) {
    http::AsyncHandlers handlers;
    handlers.on_data = [](std::string_view) { return true; };
    handlers.on_done = [&](http::AsyncResult result) {
      ok += result.error.empty() && result.status == 200 ? 1 : 0;
      ++done;
    };
    client.submit({"POST", "/v1/completions", request("ok", 5).body}, std::move(handlers));
  }
  std::size_t peak = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (done < 16 && std::chrono::steady_clock::now() < deadline) {
    peak = std::max(peak, client.open_connections());
    std::this_thread::sleep_for(1ms);
  }
  CHECK(done == 16);
  CHECK(ok == 16);
  CHECK(peak >= 2);
  CHECK(peak <= 8);
}

TEST_CASE("a request the profile has the client abandon is dropped after its delay, recorded as cancelled, not "
          "failed") {
  ScriptedServer server(2, 100us);
  GeneratorOptions options{server.url()};
  options.request_timeout_s = 30; // far beyond the abandonment
  LoadGenerator generator(options);
  auto hang = request("hang", 2);
  hang.cancel_after_s = 0.05;
  auto quick = request("ok", 2);
  quick.cancel_after_s = 20; // done long before it would be abandoned
  const auto recording = generator.open_loop({hang, quick, request("ok", 2)}, {0, 0.001, 0.002});
  REQUIRE(recording.requests.size() == 3);
  const auto& r = recording.requests;
  CHECK(r[0].cancelled);
  CHECK(r[0].error.empty());
  CHECK(r[0].end >= r[0].sent);
  CHECK_FALSE(r[1].cancelled);
  CHECK(r[1].ok());
  CHECK_FALSE(r[2].cancelled);
  SummaryOptions summary;
  summary.warmup_fraction = summary.cooldown_fraction = 0;
  summary.max_dispatch_lag_s = 60;
  const auto t = summarize_trial(recording, summary);
  CHECK(t.cancelled == 1);
  CHECK(t.measured == 2);
  CHECK(t.failed == 0);
  CHECK(t.error_rate == 0);
}

namespace {

PreparedRequest
question(const std::string& text, int tokens) {
  return {
      nlohmann::json{{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", tokens}, {"stream", true}}
          .dump(),
      3, tokens};
}

// The records of conversation `c`, by turn.
std::vector<RequestRecord>
turns_of(const TrialRecording& recording, std::int64_t c) {
  std::vector<RequestRecord> out;
  for (const auto& r : recording.requests)
    if (r.conversation == c)
      out.push_back(r);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.turn < b.turn; });
  return out;
}

} // namespace

TEST_CASE("conversations: each next turn leaves a think time after the answer, carrying every earlier question and "
          "answer") {
  ScriptedServer server(2, 200us);
  LoadGenerator generator({server.url()});
  const std::vector<PreparedConversation> conversations = {
      {{question("a0", 2), question("a1", 3), question("a2", 1)}, 0.05},
      {{question("b0", 1), question("b1", 2)}, 0.05},
      {{question("c0", 2)}, 0.05}};
  const auto recording = generator.open_loop(conversations, {0.0, 0.01, 0.02});
  REQUIRE(recording.requests.size() == 6);
  for (std::size_t i = 1; i < recording.requests.size(); ++i) // in send order
    CHECK(recording.requests[i].sent >= recording.requests[i - 1].sent);
  for (std::int64_t c = 0; c < 3; ++c) {
    const auto turns = turns_of(recording, c);
    REQUIRE(turns.size() == conversations[static_cast<std::size_t>(c)].turns.size());
    CHECK(turns[0].intended == doctest::Approx(0.01 * static_cast<double>(c)));
    for (std::size_t k = 0; k < turns.size(); ++k) {
      CAPTURE(c);
      CAPTURE(k);
      CHECK(turns[k].ok());
      if (k > 0) // due think time after the previous answer ended, and its latency counts from then
        CHECK(turns[k].intended == doctest::Approx(turns[k - 1].end + 0.05));
    }
  }
  // What the server was sent: turn k of "a" carries 2k+1 messages, the answers as streamed.
  const auto bodies = server.chat_bodies();
  REQUIRE(bodies.size() == 6);
  const nlohmann::json* third = nullptr;
  for (const auto& body : bodies)
    if (body["messages"].back()["content"] == "a2")
      third = &body;
  REQUIRE(third != nullptr);
  const auto& messages = (*third)["messages"];
  REQUIRE(messages.size() == 5);
  CHECK(messages[0] == nlohmann::json{{"role", "user"}, {"content", "a0"}});
  CHECK(messages[1] == nlohmann::json{{"role", "assistant"}, {"content", "m1 m1 "}}); // 2 chunks for 1 message
  CHECK(messages[2] == nlohmann::json{{"role", "user"}, {"content", "a1"}});
  CHECK(messages[3] == nlohmann::json{{"role", "assistant"}, {"content", "m3 m3 m3 "}});
  CHECK(messages[4] == nlohmann::json{{"role", "user"}, {"content", "a2"}});
}

TEST_CASE("conversations: a failed turn ends its conversation, and the others go on") {
  ScriptedServer server(2, 100us);
  LoadGenerator generator({server.url()});
  const std::vector<PreparedConversation> conversations = {
      {{question("a0", 1), question("429", 1), question("never sent", 1)}, 0.0},
      {{question("b0", 1), question("b1", 1)}, 0.0}};
  const auto recording = generator.open_loop(conversations, {0.0, 0.0});
  REQUIRE(recording.requests.size() == 4);
  const auto failed = turns_of(recording, 0);
  REQUIRE(failed.size() == 2);
  CHECK(failed[0].ok());
  CHECK(failed[1].error.find("HTTP 429") == 0);
  CHECK(turns_of(recording, 1).size() == 2);
}

TEST_CASE("conversations closed loop: `concurrency` users, each holding one conversation at a time") {
  ScriptedServer server(4, 100us);
  LoadGenerator generator({server.url()});
  std::vector<PreparedConversation> conversations;
  for (int c = 0; c < 6; ++c)
    conversations.push_back({{question("q", 2), question("q", 1), question("q", 2)}, 0.002});
  const auto recording = generator.closed_loop(conversations, 2);
  REQUIRE(recording.requests.size() == 18);
  // A conversation is held from its first turn's intended time to its last turn's end; never
  // more than two at once.
  std::vector<std::pair<double, double>> held;
  for (std::int64_t c = 0; c < 6; ++c) {
    const auto turns = turns_of(recording, c);
    REQUIRE(turns.size() == 3);
    held.emplace_back(turns.front().intended, turns.back().end);
  }
  for (const auto& [start, end] : held) {
    int overlapping = 0;
    for (const auto& [other_start, other_end] : held)
      overlapping += other_start <= start && other_end > start ? 1 : 0;
    CHECK(overlapping <= 2);
  }
}
