// The load generator: sends prepared OpenAI requests to an endpoint, open-loop (each at its
// scheduled time, however many are in flight) or closed-loop (a fixed number of streams, each
// sending its next request when the last one ends), over one asynchronous HTTP client, and
// records every request (request_record.hpp). The calling thread is the pacer: it sleeps to
// shortly before each send time and spins the rest, so sends leave within microseconds of
// schedule until the machine itself is the limit — which the dispatch lag then shows.
#pragma once

#include "bench/request_record.hpp"
#include "bench/saturation_stop.hpp"
#include "http/client.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace optkit::bench {

struct PreparedRequest {
  std::string body; // the JSON body as sent
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  double cancel_after_s = -1; // the generator abandons it this long after sending (-1: never)
};

// A multi-turn chat conversation: its turns' requests, each body's "messages" holding only the
// new question. The generator puts the history in front when it sends a turn: every earlier
// question and the answer the server streamed back for it.
struct PreparedConversation {
  std::vector<PreparedRequest> turns;
  double think_time_s = 0; // between an answer's end and the next question
};

struct GeneratorOptions {
  http::Url endpoint;
  std::string path = "/v1/completions"; // or /v1/chat/completions
  http::Headers headers;                // Authorization etc.
  double request_timeout_s = 600;
  std::size_t max_connections = 4096;
  std::size_t max_opening = 16; // connections opened at once (http::AsyncClientOptions)
  int io_threads = 1;
};

struct TrialRecording {
  std::vector<RequestRecord> requests; // in send order
  double duration_s = 0;               // from the trial's start to its last request's end
  std::int64_t wall_start_ms = 0;
  bool interrupted = false;
  std::string stopped_early; // why the trial gave up before its schedule ended (empty: it did not)
};

// Asked about ten times a second during an open-loop trial with every sent request's progress and
// the time: a reason ends the trial there (nothing more is sent, requests in flight are dropped).
using GiveUp = std::function<std::string(std::span<const RequestProgress> sent, double now)>;

class LoadGenerator {
public:
  explicit LoadGenerator(GeneratorOptions options);

  // Request i is `requests[i % size]`, sent at offsets[i] seconds after the start.
  TrialRecording open_loop(const std::vector<PreparedRequest>& requests, const std::vector<double>& offsets,
                           const GiveUp& give_up = {});
  // `count` requests over `concurrency` streams; each request's intended time is when its
  // stream became free.
  TrialRecording closed_loop(const std::vector<PreparedRequest>& requests, std::size_t count, int concurrency);

  // Conversations open-loop: conversation c's first turn is due at starts[c]; each later turn is
  // due think_time_s after the previous answer ended, and its latencies count from then. A turn
  // that fails or is abandoned ends its conversation. Records are in send order.
  TrialRecording open_loop(const std::vector<PreparedConversation>& conversations, const std::vector<double>& starts,
                           const GiveUp& give_up = {});
  // Conversations closed-loop: `concurrency` users, each holding one conversation at a time and
  // starting the next when it ends.
  TrialRecording closed_loop(const std::vector<PreparedConversation>& conversations, int concurrency);

  const GeneratorOptions& options() const { return m_options; }

private:
  struct ConversationStarts {
    const std::vector<double>* offsets = nullptr; // open loop: each conversation's start
    int users = 0;                                // closed loop: conversations held at once
  };
  TrialRecording run_conversations(const std::vector<PreparedConversation>& conversations, ConversationStarts starts,
                                   const GiveUp& give_up);

  GeneratorOptions m_options;
};

} // namespace optkit::bench
