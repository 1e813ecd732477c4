// A scripted OpenAI-style completions server for bench's tests and benchmarks: `slots` worker
// threads, each taking the next request, waiting `step` per token and streaming `max_tokens`
// text chunks, then usage and [DONE]. Its capacity is known by construction: at most
// slots / (max_tokens × step) requests per second. The prompt picks a fault instead: "429",
// "hang" (headers, then nothing), "garbage" (a malformed chunk), "nodone" (no [DONE]). A chat
// request (messages) is answered in chat chunks, each "mN " for the N messages it carried, and
// its fault is picked by its last message; every chat body is kept (chat_bodies()). With
// `hog_threads`, that many threads spin on the CPU whenever requests wait for a slot: a server
// that saturates the machine once overloaded, and only then (its capacity is unchanged).
#pragma once

#include "http/server.hpp"
#include "http/sse.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace optkit::test {

class ScriptedServer {
public:
  ScriptedServer(int slots, std::chrono::microseconds step, int hog_threads = 0)
      : m_step(step)
      , m_server(http::ServerOptions{},
                 [this](const http::Request& request, const std::shared_ptr<http::Exchange>& exchange) {
                   if (request.method != "POST") { // no /metrics, /health or models: a bare completions server
                     exchange->respond(404, "application/json", http::error_body(404, "not found"));
                     return;
                   }
                   std::lock_guard lock(m_mutex);
                   m_queue.emplace_back(request.body, exchange);
                   m_wake.notify_all(); // the hog threads wait on it too
                 }) {
    m_server.start();
    for (int i = 0; i < slots; ++i)
      m_workers.emplace_back([this] { work(); });
    for (int i = 0; i < hog_threads; ++i)
      m_workers.emplace_back([this] { hog(); });
  }
  ~ScriptedServer() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
      m_wake.notify_all();
    }
    for (auto& w : m_workers)
      w.join();
    m_server.stop(std::chrono::milliseconds(0));
  }
  http::Url url() const { return http::parse_url("http://127.0.0.1:" + std::to_string(m_server.port())); }
  std::atomic<int> served{0};
  std::vector<nlohmann::json> chat_bodies() {
    std::lock_guard lock(m_mutex);
    return m_chat_bodies;
  }

private:
  static http::ServerOptions server_options() {
    http::ServerOptions options;
    options.threads = 1;
    return options;
  }

  void work() {
    for (;;) {
      std::pair<std::string, std::shared_ptr<http::Exchange>> job;
      {
        std::unique_lock lock(m_mutex);
        m_wake.wait(lock, [&] { return m_stop || !m_queue.empty(); });
        if (m_stop)
          return;
        job = std::move(m_queue.front());
        m_queue.pop_front();
      }
      answer(nlohmann::json::parse(job.first), *job.second);
      ++served;
    }
  }

  // Spins while any request waits for a slot; sleeps otherwise.
  void hog() {
    for (;;) {
      {
        std::unique_lock lock(m_mutex);
        m_wake.wait(lock, [&] { return m_stop || !m_queue.empty(); });
        if (m_stop)
          return;
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  }

  void answer(const nlohmann::json& body, http::Exchange& exchange) {
    const bool chat = body.contains("messages");
    if (chat) {
      std::lock_guard lock(m_mutex);
      m_chat_bodies.push_back(body);
    }
    const std::string prompt = chat ? body["messages"].back().value("content", "") : body.value("prompt", "");
    const auto chunk =
        chat ? nlohmann::json{{"choices", {{{"delta", {{"content", fmt::format("m{} ", body["messages"].size())}}}}}}}
             : nlohmann::json{{"choices", {{{"text", "x"}}}}};
    if (prompt == "429") {
      exchange.respond(429, "application/json", http::error_body(429, "server overloaded"));
      return;
    }
    exchange.start_stream(200, "text/event-stream");
    if (prompt == "hang") // headers, then nothing until the client gives up
      return;
    if (prompt == "garbage") {
      exchange.send("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {oops\n\n");
      exchange.finish();
      return;
    }
    const int tokens = body.value("max_tokens", 1);
    for (int i = 0; i < tokens; ++i) {
      std::this_thread::sleep_for(m_step);
      exchange.send(http::format_sse_event(chunk.dump()));
    }
    if (prompt == "nodone") {
      exchange.finish();
      return;
    }
    exchange.send(http::format_sse_event(nlohmann::json{
        {"choices", nlohmann::json::array()}, {"usage", {{"prompt_tokens", 11}, {"completion_tokens", tokens}}}}
                                             .dump()));
    exchange.send(http::format_sse_event("[DONE]"));
    exchange.finish();
  }

  std::chrono::microseconds m_step;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::deque<std::pair<std::string, std::shared_ptr<http::Exchange>>> m_queue;
  bool m_stop = false;
  std::vector<std::thread> m_workers;
  std::vector<nlohmann::json> m_chat_bodies;
  http::Server m_server;
};

} // namespace optkit::test
