// An asynchronous HTTP/1.1 server (Boost.Beast on Asio) for optkit's OpenAI-compatible endpoints:
// keep-alive, chunked streaming for Server-Sent Events, caps on header and body size, an idle
// timeout, cancellation when a client goes away, and a graceful stop. Request handlers answer
// through an Exchange they may keep and complete later, from any thread (an engine thread
// streaming tokens, say).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace optkit::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;                         // "GET", "POST", ...
  std::string target;                         // path and query as sent
  std::map<std::string, std::string> headers; // names in lower case
  std::string body;

  std::string path() const;                                     // target without its query
  std::string header(const std::string& lower_case_name) const; // empty when absent
};

// The answer to one request. Exactly one of respond() or start_stream() … finish(). Thread-safe;
// it may outlive the connection, in which case what it sends goes nowhere and cancelled() is true.
class Exchange {
public:
  virtual ~Exchange() = default;
  virtual void respond(int status, const std::string& content_type, std::string body, const Headers& extra = {}) = 0;
  // Headers now (Transfer-Encoding: chunked); then send() pieces, then finish().
  virtual void start_stream(int status, const std::string& content_type, const Headers& extra = {}) = 0;
  virtual bool send(std::string piece) = 0; // false once the client is gone
  // Ends the stream; a non-empty `last_piece` goes out with the end, in one write.
  virtual void finish(std::string last_piece) = 0;
  void finish() { finish({}); }
  // True once the client disconnected, a write failed or the server stopped: stop working on it.
  virtual bool cancelled() const = 0;
  // Runs `callback` once when the exchange is cancelled (at once if it already is), on an I/O
  // thread: keep it short (flag the request, wake its engine).
  virtual void on_cancel(std::function<void()> callback) = 0;
};

using Handler = std::function<void(const Request&, const std::shared_ptr<Exchange>&)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0; // 0: a free port, see Server::port()
  // The request line and headers, and apart a chunked body's trailers: 1 KiB to 64 KiB.
  std::size_t max_header_bytes = std::size_t{16} << 10;
  std::size_t max_body_bytes = std::size_t{8} << 20;
  std::chrono::milliseconds idle_timeout{60'000}; // reading a request, and between requests
  int threads = 1;
  // Requests whose body holds at least this many bytes are handled on a thread of their own at
  // the lowest CPU priority, one at a time (http/bulk_lane.hpp), so a huge body's parsing never
  // delays the small requests; past `max_bulk_waiting` waiting ones they are answered 503 with
  // Retry-After. 0: every handler runs on the I/O threads.
  std::size_t bulk_body_bytes = 0;
  std::size_t max_bulk_waiting = 8;
  // Request bodies past a burst, and the bytes of refused bodies drained before closing, are read
  // at this pace, shared by all connections (http/byte_pace.hpp).
  double body_bytes_per_second = 64.0 * (1 << 20);
  std::size_t body_burst_bytes = std::size_t{8} << 20;
};

// JSON error body in the shape OpenAI clients parse: {"error": {"message", "type", "code"}}.
std::string error_body(int status, const std::string& message);

class Server {
public:
  // Binds and listens at once (throws RuntimeFailure naming the address when it cannot).
  Server(ServerOptions options, Handler handler);
  ~Server(); // stop(0)
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  // Serves on options.threads threads until stop().
  void start();
  // A connection from inside this process, over a socketpair (no TCP, no port), served exactly as
  // an accepted one: returns the client end's file descriptor, which the caller owns and closes.
  // The fuzz target feeds raw bytes to the server this way. Throws RuntimeFailure once stopping.
  int open_local_connection();
  // Stops accepting, lets the requests in flight finish for up to `grace`, then cancels what is
  // left, closes every connection and joins the threads; the grace ends early once
  // `cut_grace_short` (polled) returns true. Idempotent.
  void stop(std::chrono::milliseconds grace, const std::function<bool()>& cut_grace_short = {});
  std::size_t open_connections() const;
  // Accepts that failed (out of descriptors, say); each is retried after a pause of 50 ms.
  std::uint64_t accept_failures() const;

  struct State;

private:
  std::shared_ptr<State> m_state;
};

} // namespace optkit::http
