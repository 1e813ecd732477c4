#include "eval/task_requests.hpp"

#include "core/error.hpp"
#include "core/interrupt.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

namespace optkit::eval {

namespace {

std::string
server_message(const std::string& body) {
  const auto json = nlohmann::json::parse(body, nullptr, false);
  if (!json.is_discarded() && json.is_object() && json.contains("error") && json["error"].is_object() &&
      json["error"].contains("message") && json["error"]["message"].is_string())
    return json["error"]["message"].get<std::string>();
  return body.substr(0, 200);
}

bool
retryable(int status) {
  return status == 429 || status >= 500;
}

} // namespace

Generation
parse_generation(const std::string& body) {
  const auto json = nlohmann::json::parse(body, nullptr, false);
  Generation g;
  if (json.is_discarded() || !json.is_object() || !json.contains("choices") || !json["choices"].is_array() ||
      json["choices"].empty() || !json["choices"][0].is_object())
    throw RuntimeFailure("the server's response has no choices: " + body.substr(0, 200));
  const auto& choice = json["choices"][0];
  if (choice.contains("text") && choice["text"].is_string())
    g.text = choice["text"].get<std::string>();
  else if (choice.contains("message") && choice["message"].is_object() && choice["message"].contains("content") &&
           (choice["message"]["content"].is_string() || choice["message"]["content"].is_null()))
    g.text = choice["message"]["content"].is_null() ? "" : choice["message"]["content"].get<std::string>();
  else
    throw RuntimeFailure("the server's response has no choices[0].text or message.content: " + body.substr(0, 200));
  if (choice.contains("logprobs"))
    g.logprobs = choice["logprobs"];
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
    g.finish_reason = choice["finish_reason"].get<std::string>();
  if (json.contains("usage") && json["usage"].is_object() && json["usage"].contains("completion_tokens") &&
      json["usage"]["completion_tokens"].is_number_integer())
    g.completion_tokens = json["usage"]["completion_tokens"].get<long>();
  return g;
}

std::vector<Generation>
generate_all(const EndpointTarget& target, const std::string& path, const std::vector<nlohmann::json>& bodies,
             const RequestOptions& options) {
  std::vector<Generation> out(bodies.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::exception_ptr first_error;
  auto fail = [&](std::exception_ptr e) {
    std::lock_guard lock(error_mutex);
    if (!first_error)
      first_error = e;
    stop = true;
  };
  const auto worker = [&] {
    http::ClientOptions client_options;
    client_options.connect_timeout = std::chrono::milliseconds(10'000);
    client_options.request_timeout = std::chrono::milliseconds(static_cast<long>(options.timeout_s * 1000));
    client_options.headers = target.headers;
    std::unique_ptr<http::Client> client;
    while (!stop) {
      const std::size_t i = next++;
      if (i >= bodies.size())
        return;
      try {
        auto body = bodies[i];
        body["model"] = target.model;
        const std::string request = body.dump();
        if (options.cache != nullptr && options.read_cache)
          if (auto hit = options.cache->find(target.identity, request)) {
            out[i] = parse_generation(*hit);
            out[i].cached = true;
            if (options.on_done)
              options.on_done();
            continue;
          }
        std::string last_error;
        for (int attempt = 0;; ++attempt) {
          throw_if_interrupted();
          if (attempt > 0)
            std::this_thread::sleep_for(
                std::chrono::milliseconds(static_cast<long>(options.backoff_s * 1000 * std::ldexp(1.0, attempt - 1))));
          http::Response response;
          try {
            if (!client)
              client = std::make_unique<http::Client>(target.url, client_options);
            response = client->request("POST", path, request);
          } catch (const RuntimeFailure& e) {
            client.reset(); // a dropped or timed-out connection: reconnect on the retry
            last_error = e.what();
            if (attempt >= options.max_retries)
              throw RuntimeFailure(fmt::format("item {}: {} (after {} attempts)", i, last_error, attempt + 1));
            continue;
          }
          if (response.status == 200) {
            out[i] = parse_generation(response.body);
            out[i].attempts = attempt + 1;
            if (options.cache != nullptr)
              options.cache->store(target.identity, request, response.body);
            break;
          }
          last_error = fmt::format("HTTP {}: {}", response.status, server_message(response.body));
          if (!retryable(response.status))
            throw InputError(fmt::format("{}{}: item {} was refused: {}", target.url.text, path, i, last_error));
          if (attempt >= options.max_retries)
            throw RuntimeFailure(fmt::format("{}{}: item {}: {} (after {} attempts)", target.url.text, path, i,
                                             last_error, attempt + 1));
        }
        if (options.on_done)
          options.on_done();
      } catch (...) {
        fail(std::current_exception());
        return;
      }
    }
  };
  const int threads = std::max(1, std::min<int>(options.concurrency, static_cast<int>(bodies.size())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(worker);
  for (auto& t : pool)
    t.join();
  if (first_error)
    std::rethrow_exception(first_error);
  return out;
}

} // namespace optkit::eval
