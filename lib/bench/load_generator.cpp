#include "bench/load_generator.hpp"

#include "bench/openai_stream.hpp"
#include "core/clock.hpp"
#include "core/interrupt.hpp"
#include "http/async_client.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/prctl.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace optkit::bench {

namespace {

using Steady = std::chrono::steady_clock;

struct InFlight {
  RequestRecord record;
  OpenAiStreamReader reader;
};

// Everything one trial shares between the pacer thread and the I/O thread.
class TrialState {
public:
  TrialState(std::size_t count) : m_flights(count), m_first_token(count), m_end(count), m_start(Steady::now()) {
    for (std::size_t i = 0; i < count; ++i) {
      m_first_token[i].store(-1, std::memory_order_relaxed);
      m_end[i].store(-1, std::memory_order_relaxed);
    }
  }

  double now() const { return std::chrono::duration<double>(Steady::now() - m_start).count(); }
  Steady::time_point at(double offset) const {
    return m_start + std::chrono::duration_cast<Steady::duration>(std::chrono::duration<double>(offset));
  }
  InFlight& flight(std::size_t i) { return m_flights[i]; }

  // Called on the I/O thread per request: atomic stores, no lock or wake-up (the pacer polls).
  void first_token_at(std::size_t i, double t) {
    if (m_first_token[i].load(std::memory_order_relaxed) < 0)
      m_first_token[i].store(t, std::memory_order_relaxed);
  }
  void done_one(std::size_t i, double t) {
    m_end[i].store(t, std::memory_order_relaxed);
    m_done.fetch_add(1, std::memory_order_release);
  }
  // The first `sent` requests' progress so far (their intended times from `offsets`, whether the
  // client will abandon them from `requests`).
  std::vector<RequestProgress> progress(std::size_t sent, const std::vector<double>& offsets,
                                        const std::vector<PreparedRequest>& requests) const {
    std::vector<RequestProgress> out(sent);
    for (std::size_t i = 0; i < sent; ++i)
      out[i] = {offsets[i], m_first_token[i].load(std::memory_order_relaxed), m_end[i].load(std::memory_order_acquire),
                requests[i % requests.size()].cancel_after_s >= 0};
    return out;
  }
  // Waits until `count` requests are done or `deadline` passes or an interrupt arrives or
  // `give_up` (asked every tenth of a second) says why to stop.
  bool wait_done(std::size_t count, Steady::time_point deadline, const std::function<bool()>& give_up = {}) {
    auto next_check = Steady::now();
    while (m_done.load(std::memory_order_acquire) < count) {
      if (interrupt_requested() || Steady::now() >= deadline)
        return false;
      if (give_up && Steady::now() >= next_check) {
        if (give_up())
          return false;
        next_check = Steady::now() + kGiveUpCheck;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  static constexpr auto kGiveUpCheck = std::chrono::milliseconds(100);

  TrialRecording take(std::size_t sent, std::int64_t wall_start_ms) {
    TrialRecording out;
    out.wall_start_ms = wall_start_ms;
    out.requests.reserve(sent);
    std::lock_guard lock(m_mutex);
    for (std::size_t i = 0; i < sent; ++i) {
      out.requests.push_back(std::move(m_flights[i].record));
      auto& record = out.requests.back();
      if (record.end < 0 && record.error.empty()) // its client stopped before it started
        record.error = "did not complete before the trial ended";
      out.duration_s = std::max(out.duration_s, out.requests.back().end);
    }
    return out;
  }

private:
  std::vector<InFlight> m_flights;
  std::vector<std::atomic<double>> m_first_token, m_end; // -1 until known
  Steady::time_point m_start;
  std::mutex m_mutex;
  std::atomic<std::size_t> m_done{0};
};

void
finish_record(InFlight& flight, const http::AsyncResult& result, double now, const PreparedRequest& request) {
  auto& record = flight.record;
  record.end = now;
  record.status = result.status;
  const auto& reader = flight.reader;
  record.cancelled = result.cancelled && request.cancel_after_s >= 0;
  if (record.cancelled) { // abandoned as planned: not an error, and no latency to count
    record.first_token = reader.first_text_time();
    return;
  }
  if (!result.error.empty()) {
    record.error = result.status == 0 ? result.error : fmt::format("HTTP {}: {}", result.status, result.error);
  } else if (result.status < 200 || result.status >= 300) {
    std::string message;
    const auto body = nlohmann::json::parse(result.body, nullptr, false);
    if (body.is_object() && body.contains("error") && body["error"].is_object())
      message = body["error"].value("message", std::string());
    record.error = fmt::format("HTTP {}{}", result.status, message.empty() ? "" : ": " + message.substr(0, 200));
  } else if (!reader.error().empty()) {
    record.error = reader.error();
  } else if (!reader.done()) {
    record.error = "the stream ended without data: [DONE]";
  }
  record.first_token = reader.first_text_time();
  record.chunk_times = reader.text_chunk_times();
  record.usage_reported = reader.has_usage();
  record.input_tokens = reader.has_usage() ? reader.prompt_tokens() : request.input_tokens;
  record.output_tokens = reader.has_usage() ? reader.completion_tokens() : reader.text_chunks();
  record.server_queue_s = reader.server_queue_s();
  if (record.ok() && record.first_token < 0)
    record.error = "the stream carried no output text";
}

std::unique_ptr<http::AsyncClient>
make_client(const GeneratorOptions& options) {
  http::AsyncClientOptions client;
  client.client.request_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(std::max(0.001, options.request_timeout_s) * 1000));
  client.client.headers = options.headers;
  client.max_connections = options.max_connections;
  client.max_opening = options.max_opening;
  client.threads = options.io_threads;
  return std::make_unique<http::AsyncClient>(options.endpoint, client);
}

void
submit(http::AsyncClient& client, const GeneratorOptions& options, TrialState& state, std::size_t index,
       const PreparedRequest& request, std::function<void()> after) {
  auto& flight = state.flight(index);
  http::AsyncHandlers handlers;
  handlers.on_send = [&flight, &state] {
    if (flight.record.sent < 0)
      flight.record.sent = state.now();
  };
  handlers.on_data = [&flight, &state, index](std::string_view bytes) {
    const bool more = flight.reader.feed(bytes, state.now());
    if (const double first = flight.reader.first_text_time(); first >= 0)
      state.first_token_at(index, first);
    return more;
  };
  handlers.on_done = [&flight, &state, &request, index, after = std::move(after)](http::AsyncResult result) {
    finish_record(flight, result, state.now(), request);
    state.done_one(index, flight.record.end);
    if (after)
      after();
  };
  http::AsyncRequest async{"POST", options.path, request.body, "application/json", std::nullopt};
  if (request.cancel_after_s >= 0)
    async.abandon_after = std::chrono::milliseconds(static_cast<std::int64_t>(request.cancel_after_s * 1000));
  client.submit(std::move(async), std::move(handlers));
}

// Waits for `target` without spinning. A sparse schedule sleeps to each send exactly (timer
// slack 1 ns, see PacerTimerSlack). A dense one would wake the thread per request, and on a
// small machine those wake-ups, not the sends, become the limit: so a sleep is never shorter
// than `min_sleep`, and every request due when the thread wakes goes at once. That bounds the
// dispatch lag it adds by `min_sleep` (well inside the 1 ms goal) and caps wake-ups at
// 1/min_sleep per second whatever the rate.
void
pace_until(Steady::time_point target) {
  constexpr auto min_sleep = std::chrono::microseconds(200);
  const auto now = Steady::now();
  if (target > now)
    std::this_thread::sleep_until(std::max(target, now + min_sleep));
}

// Linux's default timer slack (50 µs) rounds every sleep up by as much; restored on exit.
class PacerTimerSlack {
public:
  PacerTimerSlack() : m_previous(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) { prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); }
  ~PacerTimerSlack() {
    if (m_previous > 0)
      prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(m_previous), 0, 0, 0);
  }
  PacerTimerSlack(const PacerTimerSlack&) = delete;
  PacerTimerSlack& operator=(const PacerTimerSlack&) = delete;

private:
  int m_previous;
};

} // namespace

LoadGenerator::LoadGenerator(GeneratorOptions options) : m_options(std::move(options)) {}

TrialRecording
LoadGenerator::open_loop(const std::vector<PreparedRequest>& requests, const std::vector<double>& offsets,
                         const GiveUp& give_up) {
  const std::size_t count = requests.empty() ? 0 : offsets.size();
  auto client = make_client(m_options);
  const auto wall_start = SystemClock::instance().wall_ms();
  TrialState state(count);
  std::size_t sent = 0;
  bool interrupted = false;
  std::string stopped_early;
  const auto gave_up = [&] {
    if (give_up)
      stopped_early = give_up(state.progress(sent, offsets, requests), state.now());
    return !stopped_early.empty();
  };
  auto next_check = Steady::now() + TrialState::kGiveUpCheck;
  const PacerTimerSlack precise_sleeps;
  for (; sent < count; ++sent) {
    if (interrupt_requested()) {
      interrupted = true;
      break;
    }
    if (give_up && Steady::now() >= next_check) {
      if (gave_up())
        break;
      next_check = Steady::now() + TrialState::kGiveUpCheck;
    }
    pace_until(state.at(offsets[sent]));
    auto& record = state.flight(sent).record;
    record.index = sent;
    record.intended = offsets[sent];
    submit(*client, m_options, state, sent, requests[sent % requests.size()], nullptr);
  }
  const double last = sent > 0 ? offsets[sent - 1] : 0.0;
  if (stopped_early.empty() && !state.wait_done(sent, state.at(last + m_options.request_timeout_s + 5.0),
                                                give_up ? std::function<bool()>(gave_up) : nullptr))
    interrupted = interrupted || interrupt_requested();
  client.reset(); // ends whatever is left (timed out, interrupted, given up) with an error
  auto out = state.take(sent, wall_start);
  out.interrupted = interrupted;
  out.stopped_early = stopped_early;
  return out;
}

TrialRecording
LoadGenerator::closed_loop(const std::vector<PreparedRequest>& requests, std::size_t count, int concurrency) {
  if (requests.empty())
    count = 0;
  auto client = make_client(m_options);
  const auto wall_start = SystemClock::instance().wall_ms();
  TrialState state(count);
  std::atomic<std::size_t> next{0};
  // Each stream sends its next request from the previous one's completion, on the I/O thread.
  std::function<void()> send_next = [&] {
    const std::size_t index = next.fetch_add(1);
    if (index >= count || interrupt_requested())
      return;
    auto& record = state.flight(index).record;
    record.index = index;
    record.intended = state.now();
    submit(*client, m_options, state, index, requests[index % requests.size()], send_next);
  };
  for (int stream = 0; stream < std::max(1, concurrency); ++stream)
    send_next();
  const bool all =
      state.wait_done(count, Steady::now() + std::chrono::duration_cast<Steady::duration>(std::chrono::duration<double>(
                                                 m_options.request_timeout_s * (static_cast<double>(count) + 1.0))));
  next.store(count); // no stream starts another request
  client.reset();
  auto out = state.take(count, wall_start);
  // Requests never started (interrupt) carry no times; drop them.
  std::erase_if(out.requests, [](const RequestRecord& r) { return r.sent < 0 && r.end < 0; });
  out.interrupted = !all && interrupt_requested();
  return out;
}

} // namespace optkit::bench
