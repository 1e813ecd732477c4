// libFuzzer target: arbitrary bytes as a server-sent event stream. Properties: the parser never
// crashes or grows without bound; feeding the bytes whole or split at a point the input chooses
// gives the same events (a TCP stream splits anywhere); and every event's data written back by
// the writer parses to the same data.
#include "http/sse.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::vector<optkit::http::SseEvent>
parse(std::string_view text, std::size_t split) {
  std::vector<optkit::http::SseEvent> events;
  optkit::http::SseParser parser(1 << 16);
  const auto collect = [&](const optkit::http::SseEvent& e) { events.push_back(e); };
  split = std::min(split, text.size());
  try {
    parser.feed(text.substr(0, split), collect);
    parser.feed(text.substr(split), collect);
  } catch (const std::exception&) {
    events.clear(); // over the cap: both splittings must agree on that too
    events.push_back({"<too long>", "", ""});
  }
  return events;
}

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const std::size_t split = data[0] % size;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto whole = parse(text, text.size());
  const auto split_events = parse(text, split);
  if (whole.size() != split_events.size())
    __builtin_trap();
  for (std::size_t i = 0; i < whole.size(); ++i)
    if (whole[i].data != split_events[i].data || whole[i].event != split_events[i].event ||
        whole[i].id != split_events[i].id)
      __builtin_trap();
  for (const auto& event : whole) {
    if (event.event == "<too long>" || event.event.find_first_of("\r\n") != std::string::npos)
      continue;
    // The writer splits data on LF only: a CR inside data cannot come out of a parsed event.
    const auto again = parse(optkit::http::format_sse_event(event.data, event.event), std::string::npos);
    if (again.size() != 1 || again[0].data != event.data || again[0].event != event.event)
      __builtin_trap();
  }
  return 0;
}
