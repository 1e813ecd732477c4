// libFuzzer target: arbitrary bytes sent to the real HTTP server (http::Server, the one
// serve-deltas runs) on one loopback connection, which then ends its sending side: request lines,
// headers, chunked framing, trailers, pipelined requests. Properties: the server never crashes
// (ASan, UBSan, and no exception may leave a handler), every connection ends, and after each input
// the server still answers a well-formed request.
#include "http/client.hpp"
#include "http/server.hpp"

#include <boost/asio.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

using namespace optkit::http;
namespace net = boost::asio;

// One server for the whole run: small caps so inputs reach them, echoing what it parsed.
Server&
server() {
  static Server* instance = [] {
    ServerOptions options;
    options.max_header_bytes = 2048;
    options.max_body_bytes = 4096;
    options.idle_timeout = std::chrono::milliseconds(500);
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

// Sends `bytes`, ends the sending side, and reads until the server closes (bounded: a connection
// the server never ends is a finding, reported as a timeout by libFuzzer).
void
send_raw(int port, const std::uint8_t* data, std::size_t size) {
  net::io_context ioc;
  net::ip::tcp::socket socket(ioc);
  socket.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  boost::system::error_code ec;
  net::write(socket, net::buffer(data, size), ec);
  socket.shutdown(net::ip::tcp::socket::shutdown_send, ec);
  char buffer[4096];
  while (!ec)
    socket.read_some(net::buffer(buffer), ec);
}

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Server& s = server();
  send_raw(s.port(), data, size);
  Client client(parse_url("http://127.0.0.1:" + std::to_string(s.port())));
  if (client.request("POST", "/check", "ok").status != 200)
    std::abort(); // the server stopped serving
  return 0;
}
