#include "http/sse.hpp"

#include "core/error.hpp"

namespace optkit::http {

std::string
format_sse_event(std::string_view data, std::string_view event) {
  std::string out;
  out.reserve(data.size() + 16);
  if (!event.empty()) {
    out += "event: ";
    out += event;
    out += '\n';
  }
  std::size_t start = 0;
  while (true) {
    const auto end = data.find('\n', start);
    out += "data: ";
    out += data.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    out += '\n';
    if (end == std::string_view::npos)
      break;
    start = end + 1;
  }
  out += '\n';
  return out;
}

void
SseParser::feed(std::string_view bytes, const std::function<void(const SseEvent&)>& on_event) {
  for (const char c : bytes) {
    if (c == '\n' && m_after_cr) {
      m_after_cr = false;
      continue;
    }
    m_after_cr = c == '\r';
    if (c == '\n' || c == '\r') {
      line(m_line, on_event);
      m_line.clear();
      continue;
    }
    m_line += c;
    if (m_line.size() + m_event.data.size() > m_max_event_bytes)
      throw InputError("server-sent event longer than " + std::to_string(m_max_event_bytes) +
                       " bytes: the stream does not look like an event stream");
  }
}

void
SseParser::line(std::string_view text, const std::function<void(const SseEvent&)>& on_event) {
  if (text.empty()) { // a blank line dispatches what was gathered
    if (m_has_data) {
      on_event(m_event);
    }
    m_event = SseEvent{};
    m_has_data = false;
    return;
  }
  if (text.front() == ':')
    return; // a comment (servers send these as keep-alives)
  const auto colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ')
    value.remove_prefix(1);
  if (field == "data") {
    if (m_has_data)
      m_event.data += '\n';
    m_event.data += value;
    m_has_data = true;
  } else if (field == "event") {
    m_event.event = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos)
      m_event.id = std::string(value);
  }
}

} // namespace optkit::http
