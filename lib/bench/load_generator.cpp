#include "bench/load_generator.hpp"

#include "bench/openai_stream.hpp"
#include "core/clock.hpp"
#include "core/interrupt.hpp"
#include "http/async_client.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/prctl.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <queue>
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
      out[i] = progress_of(i, offsets[i], requests[i % requests.size()].cancel_after_s >= 0);
    return out;
  }
  RequestProgress progress_of(std::size_t i, double intended, bool to_be_cancelled) const {
    return {intended, m_first_token[i].load(std::memory_order_relaxed), m_end[i].load(std::memory_order_acquire),
            to_be_cancelled};
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
    std::vector<std::size_t> indices(sent);
    for (std::size_t i = 0; i < sent; ++i)
      indices[i] = i;
    return take(indices, wall_start_ms);
  }
  // The records of the requests sent, in the order given.
  TrialRecording take(const std::vector<std::size_t>& sent, std::int64_t wall_start_ms) {
    TrialRecording out;
    out.wall_start_ms = wall_start_ms;
    out.requests.reserve(sent.size());
    std::lock_guard lock(m_mutex);
    for (const std::size_t i : sent) {
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

// What ends a pacer's loop before its schedule does: Ctrl-C, or `give_up` (when there is one),
// asked at most every kGiveUpCheck. check_by() is when the pacer must look again at the latest.
class PacerStop {
public:
  explicit PacerStop(std::function<bool()> gave_up) : m_gave_up(std::move(gave_up)) {}
  bool now() {
    if (interrupt_requested()) {
      interrupted = true;
      return true;
    }
    if (Steady::now() >= m_next) {
      if (m_gave_up && m_gave_up())
        return true;
      m_next = Steady::now() + TrialState::kGiveUpCheck;
    }
    return false;
  }
  Steady::time_point check_by() const { return m_next; }
  bool interrupted = false;

private:
  std::function<bool()> m_gave_up;
  Steady::time_point m_next = Steady::now() + TrialState::kGiveUpCheck;
};

// What a conversation trial shares between the pacer and the I/O thread: each conversation's
// history, and the turns that are due, earliest first. A turn's request is request
// first_index(c) + turn of the trial.
class ConversationBook {
public:
  struct DueTurn {
    double at = 0; // trial seconds
    std::size_t conversation = 0, turn = 0;
    bool operator>(const DueTurn& other) const { return at > other.at; }
  };

  explicit ConversationBook(const std::vector<PreparedConversation>& conversations)
      : m_conversations(conversations)
      , m_histories(conversations.size(), nlohmann::json::array())
      , m_questions(conversations.size())
      , m_first_index(conversations.size()) {
    for (std::size_t c = 0; c < conversations.size(); ++c) {
      m_first_index[c] = m_turns;
      m_turns += conversations[c].turns.size();
    }
  }

  std::size_t turns() const { return m_turns; }
  std::size_t first_index(std::size_t conversation) const { return m_first_index[conversation]; }
  const PreparedRequest& request(const DueTurn& t) const { return m_conversations[t.conversation].turns[t.turn]; }

  void make_due(DueTurn turn) {
    std::lock_guard lock(m_mutex);
    m_due.push(turn);
    m_wake.notify_one();
  }
  // Closed loop: the next conversation not yet started is due at `at` (none left: nothing).
  void start_next(double at) {
    std::lock_guard lock(m_mutex);
    if (m_started < m_conversations.size()) {
      m_due.push({at, m_started++, 0});
      m_wake.notify_one();
    }
  }
  void mark_started(std::size_t count) { m_started = count; }
  bool all_ended() {
    std::lock_guard lock(m_mutex);
    return m_ended == m_conversations.size();
  }

  // The earliest turn once it is due, or nothing at `check_by` or once every conversation ended.
  std::optional<DueTurn> wait_due(const TrialState& state, Steady::time_point check_by) {
    std::unique_lock lock(m_mutex);
    for (;;) {
      if (m_ended == m_conversations.size())
        return std::nullopt;
      auto wake = check_by;
      if (!m_due.empty()) {
        const auto at = state.at(m_due.top().at);
        if (at <= Steady::now()) {
          const auto due = m_due.top();
          m_due.pop();
          return due;
        }
        wake = std::min(wake, at);
      }
      if (Steady::now() >= check_by)
        return std::nullopt;
      m_wake.wait_until(lock, wake);
    }
  }

  // The body to send for `turn`: its question after the conversation's history so far.
  std::string body(const DueTurn& turn) {
    auto body = nlohmann::json::parse(request(turn).body);
    std::lock_guard lock(m_mutex);
    auto messages = m_histories[turn.conversation];
    for (const auto& message : body.at("messages")) {
      messages.push_back(message);
      m_questions[turn.conversation].push_back(message);
    }
    body["messages"] = std::move(messages);
    return body.dump();
  }

  // `turn` ended at `end`: when it succeeded and another follows, its question and `answer` join
  // the history and the next turn is due after the think time; otherwise the conversation ends.
  // Returns whether it ended.
  bool turn_ended(const DueTurn& turn, bool succeeded, const std::string& answer, double end) {
    std::lock_guard lock(m_mutex);
    const auto& conversation = m_conversations[turn.conversation];
    auto& history = m_histories[turn.conversation];
    auto& question = m_questions[turn.conversation];
    if (succeeded && turn.turn + 1 < conversation.turns.size()) {
      for (auto& message : question)
        history.push_back(std::move(message));
      question.clear();
      history.push_back({{"role", "assistant"}, {"content", answer}});
      m_due.push({end + conversation.think_time_s, turn.conversation, turn.turn + 1});
      m_wake.notify_one();
      return false;
    }
    history = nlohmann::json::array(); // its memory goes now, not at the trial's end
    question.clear();
    ++m_ended;
    m_wake.notify_one();
    return true;
  }

private:
  const std::vector<PreparedConversation>& m_conversations;
  std::vector<nlohmann::json> m_histories;              // messages sent and answered so far
  std::vector<std::vector<nlohmann::json>> m_questions; // the question in flight
  std::vector<std::size_t> m_first_index;
  std::size_t m_turns = 0;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::priority_queue<DueTurn, std::vector<DueTurn>, std::greater<>> m_due;
  std::size_t m_ended = 0, m_started = 0;
};

} // namespace

LoadGenerator::LoadGenerator(GeneratorOptions options) : m_options(std::move(options)) {}

TrialRecording
LoadGenerator::open_loop(const std::vector<PreparedConversation>& conversations, const std::vector<double>& starts,
                         const GiveUp& give_up) {
  return run_conversations(conversations, {&starts, 0}, give_up);
}

TrialRecording
LoadGenerator::closed_loop(const std::vector<PreparedConversation>& conversations, int concurrency) {
  return run_conversations(conversations, {nullptr, std::max(1, concurrency)}, {});
}

TrialRecording
LoadGenerator::run_conversations(const std::vector<PreparedConversation>& conversations, ConversationStarts starts,
                                 const GiveUp& give_up) {
  ConversationBook book(conversations);
  TrialState state(book.turns());
  std::vector<PreparedRequest> sent_requests(book.turns()); // as sent, history included
  std::vector<std::size_t> sent;                            // request indices in send order
  std::vector<double> intended(book.turns(), 0.0);
  const auto wall_start = SystemClock::instance().wall_ms();
  auto client = make_client(m_options);
  if (starts.offsets != nullptr) {
    for (std::size_t c = 0; c < conversations.size(); ++c)
      book.make_due({(*starts.offsets)[c], c, 0});
    book.mark_started(conversations.size());
  } else {
    for (int user = 0; user < starts.users; ++user)
      book.start_next(0.0);
  }
  const bool closed = starts.offsets == nullptr;
  std::string stopped_early;
  PacerStop stop(give_up ? std::function<bool()>([&] {
    std::vector<RequestProgress> progress;
    progress.reserve(sent.size());
    for (const auto i : sent)
      progress.push_back(state.progress_of(i, intended[i], sent_requests[i].cancel_after_s >= 0));
    stopped_early = give_up(progress, state.now());
    return !stopped_early.empty();
  })
                         : nullptr);
  const PacerTimerSlack precise_sleeps;
  while (!book.all_ended() && !stop.now()) {
    const auto due = book.wait_due(state, stop.check_by());
    if (!due)
      continue;
    const std::size_t index = book.first_index(due->conversation) + due->turn;
    auto& request = sent_requests[index];
    request = book.request(*due);
    request.body = book.body(*due);
    intended[index] = due->at;
    auto& flight = state.flight(index);
    flight.record.index = index;
    flight.record.intended = due->at;
    flight.record.conversation = static_cast<std::int64_t>(due->conversation);
    flight.record.turn = static_cast<int>(due->turn);
    flight.reader.keep_text();
    sent.push_back(index);
    submit(*client, m_options, state, index, request, [&book, &state, turn = *due, index, closed] {
      const auto& ended = state.flight(index);
      if (book.turn_ended(turn, ended.record.ok(), ended.reader.text(), ended.record.end) && closed)
        book.start_next(ended.record.end);
    });
  }
  client.reset(); // ends whatever is left (given up, interrupted) with an error
  auto out = state.take(sent, wall_start);
  out.interrupted = stop.interrupted;
  out.stopped_early = stopped_early;
  return out;
}

TrialRecording
LoadGenerator::open_loop(const std::vector<PreparedRequest>& requests, const std::vector<double>& offsets,
                         const GiveUp& give_up) {
  const std::size_t count = requests.empty() ? 0 : offsets.size();
  auto client = make_client(m_options);
  const auto wall_start = SystemClock::instance().wall_ms();
  TrialState state(count);
  std::size_t sent = 0;
  std::string stopped_early;
  const auto gave_up = [&] {
    if (give_up)
      stopped_early = give_up(state.progress(sent, offsets, requests), state.now());
    return !stopped_early.empty();
  };
  PacerStop stop(give_up ? std::function<bool()>(gave_up) : nullptr);
  const PacerTimerSlack precise_sleeps;
  for (; sent < count && !stop.now(); ++sent) {
    pace_until(state.at(offsets[sent]));
    auto& record = state.flight(sent).record;
    record.index = sent;
    record.intended = offsets[sent];
    submit(*client, m_options, state, sent, requests[sent % requests.size()], nullptr);
  }
  const double last = sent > 0 ? offsets[sent - 1] : 0.0;
  if (stopped_early.empty() && !state.wait_done(sent, state.at(last + m_options.request_timeout_s + 5.0),
                                                give_up ? std::function<bool()>(gave_up) : nullptr))
    stop.interrupted = stop.interrupted || interrupt_requested();
  client.reset(); // ends whatever is left (timed out, interrupted, given up) with an error
  auto out = state.take(sent, wall_start);
  out.interrupted = stop.interrupted;
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
