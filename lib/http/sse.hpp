// Server-Sent Events (the WHATWG event-stream format OpenAI-compatible servers stream in): the
// writer the server uses and the incremental reader every client in optkit uses.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace optkit::http {

// One event as written: `data` may hold newlines (each becomes its own data: line).
std::string format_sse_event(std::string_view data, std::string_view event = {});

struct SseEvent {
  std::string event; // the event: field, empty for the default "message"
  std::string data;  // data: lines joined by '\n'
  std::string id;
};

// Feed it bytes as they arrive, split anywhere; it calls back once per complete event. Lines may
// end in CRLF, LF or CR; comments (":...") and unknown fields are ignored, as the standard says.
class SseParser {
public:
  explicit SseParser(std::size_t max_event_bytes = std::size_t{16} << 20) : m_max_event_bytes(max_event_bytes) {}

  // Throws InputError when one event grows past max_event_bytes (a stream that never ends one).
  void feed(std::string_view bytes, const std::function<void(const SseEvent&)>& on_event);

private:
  void line(std::string_view text, const std::function<void(const SseEvent&)>& on_event);

  std::size_t m_max_event_bytes;
  std::string m_line;
  bool m_after_cr = false; // the previous byte was a CR: a following LF ends nothing new
  bool m_has_data = false;
  SseEvent m_event;
};

} // namespace optkit::http
