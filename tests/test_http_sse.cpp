// The event-stream codec against the WHATWG HTML standard's rules and examples (§9.2 Server-sent
// events): line endings, comments, multi-line data, the optional space after the colon, and
// input split at every byte.
#include "core/error.hpp"
#include "http/sse.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace optkit;
using namespace optkit::http;

namespace {

std::vector<SseEvent>
parse_all(const std::string& text, std::size_t piece = std::string::npos) {
  std::vector<SseEvent> events;
  SseParser parser;
  for (std::size_t at = 0; at < text.size(); at += piece == std::string::npos ? text.size() : piece)
    parser.feed(std::string_view(text).substr(at, piece), [&](const SseEvent& e) { events.push_back(e); });
  return events;
}

} // namespace

TEST_CASE("the standard's examples: a comment, multi-line data, ids, and data without a blank line is dropped") {
  const auto events =
      parse_all(": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n");
  REQUIRE(events.size() == 2); // the third has no terminating blank line
  CHECK(events[0].data == "first event");
  CHECK(events[0].id == "1");
  CHECK(events[1].data == "second event");
  CHECK(events[1].id.empty());
  const auto multi = parse_all("data: YHOO\ndata: +2\ndata: 10\n\n");
  REQUIRE(multi.size() == 1);
  CHECK(multi[0].data == "YHOO\n+2\n10");
  const auto empties = parse_all("data\n\ndata\ndata\n\ndata:\n");
  REQUIRE(empties.size() == 2);
  CHECK(empties[0].data.empty());
  CHECK(empties[1].data == "\n");
  const auto spaced = parse_all("data:test\n\ndata: test\n\n");
  CHECK(spaced[0].data == spaced[1].data);
}

TEST_CASE("CRLF, LF and CR end lines, even split across reads; events name their type") {
  const std::string text = "event: delta\r\ndata: {\"a\":1}\r\n\r\ndata: x\rdata: y\r\rdata: [DONE]\n\n";
  for (std::size_t piece = 1; piece <= text.size(); ++piece) {
    CAPTURE(piece);
    const auto events = parse_all(text, piece);
    REQUIRE(events.size() == 3);
    CHECK(events[0].event == "delta");
    CHECK(events[0].data == "{\"a\":1}");
    CHECK(events[1].event.empty());
    CHECK(events[1].data == "x\ny");
    CHECK(events[2].data == "[DONE]");
  }
}

TEST_CASE("what the writer writes the reader reads back, newlines and all") {
  for (const std::string data :
       {"", "plain", "two\nlines", "\n", "{\"choices\":[{\"delta\":{\"content\":\"a:b\"}}]}"}) {
    CAPTURE(data);
    const auto events = parse_all(format_sse_event(data, "message") + format_sse_event("[DONE]"));
    REQUIRE(events.size() == 2);
    CHECK(events[0].event == "message");
    CHECK(events[0].data == data);
    CHECK(events[1].data == "[DONE]");
  }
  CHECK(format_sse_event("x") == "data: x\n\n");
}

TEST_CASE("an event that never ends is refused once it passes the cap") {
  SseParser parser(64);
  const auto ignore = [](const SseEvent&) {};
  parser.feed("data: short\n\n", ignore);
  CHECK_THROWS_AS(parser.feed("data: " + std::string(100, 'x'), ignore), InputError);
}
