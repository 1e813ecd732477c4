// Reads an OpenAI-compatible streamed response (completions or chat) as it arrives: which
// chunks carried output text and when, the usage tail, the server's timing when it sends one,
// and whether the stream ended properly with `data: [DONE]`. Bytes come from the network, so
// anything malformed becomes an error string, never a crash.
#pragma once

#include "http/sse.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace optkit::bench {

class OpenAiStreamReader {
public:
  OpenAiStreamReader() : m_parser(std::size_t{1} << 20) {}

  // Returns false once the stream is unusable (error() says why); the caller stops reading.
  // `now` is the arrival time of these bytes.
  bool feed(std::string_view bytes, double now);

  // Keep the answer's text (content, not reasoning) for text(): a multi-turn conversation sends
  // it back as the assistant's message.
  void keep_text() { m_keep_text = true; }
  const std::string& text() const { return m_text; }

  bool done() const { return m_done; }
  const std::string& error() const { return m_error; }
  double first_text_time() const { return m_first_text; }
  const std::vector<double>& text_chunk_times() const { return m_chunk_times; }
  std::int64_t text_chunks() const { return static_cast<std::int64_t>(m_chunk_times.size()); }
  bool has_usage() const { return m_has_usage; }
  std::int64_t prompt_tokens() const { return m_prompt_tokens; }
  std::int64_t completion_tokens() const { return m_completion_tokens; }
  double server_queue_s() const { return m_server_queue_s; }
  const std::string& finish_reason() const { return m_finish_reason; }

private:
  void on_event(const http::SseEvent& event, double now);

  http::SseParser m_parser;
  bool m_done = false;
  std::string m_error;
  double m_first_text = -1;
  std::vector<double> m_chunk_times;
  bool m_has_usage = false;
  std::int64_t m_prompt_tokens = 0;
  std::int64_t m_completion_tokens = 0;
  double m_server_queue_s = -1;
  std::string m_finish_reason;
  bool m_keep_text = false;
  std::string m_text;
};

} // namespace optkit::bench
