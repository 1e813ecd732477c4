// libFuzzer target: arbitrary bytes sent to the real HTTP server (http::Server, the one
// serve-deltas runs) on one in-process connection (a socketpair: no TCP, no port, so millions of
// inputs never run out of ephemeral ports), which then ends its sending side: request lines,
// headers, chunked framing, trailers, pipelined requests. Properties: the server never crashes
// (ASan, UBSan, and no exception may leave a handler), every connection ends, and after each input
// the server still answers a well-formed request on a fresh connection.
#include "http/server.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

using namespace optkit::http;

// One server for the whole run: small caps so inputs reach them, echoing what it parsed.
Server&
server() {
  static Server* instance = [] {
    ServerOptions options;
    options.max_header_bytes = 2048;
    options.max_body_bytes = 4096;
    options.idle_timeout = std::chrono::milliseconds(500);
    options.bulk_body_bytes = 1024; // bodies this large go through the bulk lane
    auto* s = new Server(options, [](const Request& request, const std::shared_ptr<Exchange>& exchange) {
      if (request.path() == "/stream") {
        exchange->start_stream(200, "text/event-stream", {});
        exchange->send("data: " + request.body.substr(0, 64) + "\n\n");
        exchange->finish();
        return;
      }
      exchange->respond(200, "text/plain", request.method + " " + request.target + " " + request.body);
    });
    s->start();
    return s;
  }();
  return *instance;
}

// Sends `size` bytes on a new connection, ends the sending side when `half_close` (the server
// then treats the client as gone once it has read everything), and returns what the server wrote
// until it closed (bounded: a connection the server never ends is a finding, reported as a timeout
// by libFuzzer).
std::string
exchange_bytes(const std::uint8_t* data, std::size_t size, bool half_close) {
  const int fd = server().open_local_connection();
  std::size_t sent = 0;
  while (sent < size) { // a refusal mid-body closes the server's side: the rest is not sent
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break;
    sent += static_cast<std::size_t>(n);
  }
  if (half_close)
    ::shutdown(fd, SHUT_WR);
  std::string received;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;)
    received.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return received;
}

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  exchange_bytes(data, size, true);
  static const std::string check =
      "POST /check HTTP/1.1\r\nHost: fuzz\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
  const std::string answer = exchange_bytes(reinterpret_cast<const std::uint8_t*>(check.data()), check.size(), false);
  if (answer.rfind("HTTP/1.1 200 ", 0) != 0)
    std::abort(); // the server stopped serving
  return 0;
}
