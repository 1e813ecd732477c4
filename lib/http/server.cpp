#include "http/server.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "http/bulk_lane.hpp"
#include "http/byte_pace.hpp"
#include "http/json_body.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace optkit::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
// A session's socket: an accepted TCP connection, or one end of an in-process socketpair.
using StreamProtocol = net::generic::stream_protocol;

std::string
Request::path() const {
  return target.substr(0, target.find('?'));
}

std::string
Request::header(const std::string& lower_case_name) const {
  const auto it = headers.find(lower_case_name);
  return it == headers.end() ? std::string{} : it->second;
}

std::string
error_body(int status, const std::string& message) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 429 ? "rate_limit_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return dump_json(
      nlohmann::json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}});
}

namespace {

class Session;

std::string
status_line(int status) {
  const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) + "\r\n";
}

// Response head; no content length means chunked.
std::string
response_head(int status, const std::string& content_type, const Headers& extra, bool keep_alive,
              std::optional<std::size_t> content_length) {
  std::string head = status_line(status);
  if (!content_type.empty())
    head += "Content-Type: " + content_type + "\r\n";
  for (const auto& [name, value] : extra)
    head += name + ": " + value + "\r\n";
  head += content_length ? "Content-Length: " + std::to_string(*content_length) + "\r\n"
                         : std::string("Transfer-Encoding: chunked\r\n");
  head += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return head;
}

std::string
chunk(const std::string& piece) {
  char size[32];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
  std::string out(size, static_cast<std::size_t>(n));
  out += piece;
  out += "\r\n";
  return out;
}

} // namespace

struct Server::State : std::enable_shared_from_this<Server::State> {
  ServerOptions options;
  Handler handler;
  std::unique_ptr<BulkLane> bulk_lane; // when options.bulk_body_bytes > 0
  BytePace body_pace;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer accept_retry; // on the acceptor's strand
  std::atomic<std::uint64_t> accept_failures{0};
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  mutable std::mutex mutex;
  std::vector<std::weak_ptr<Session>> sessions;
  std::size_t live_sessions = 0;

  State(ServerOptions o, Handler h)
      : options(std::move(o))
      , handler(std::move(h))
      , bulk_lane(options.bulk_body_bytes > 0 ? std::make_unique<BulkLane>(options.max_bulk_waiting) : nullptr)
      , body_pace(options.body_bytes_per_second, options.body_burst_bytes)
      , ioc(std::max(1, options.threads))
      , acceptor(net::make_strand(ioc))
      , accept_retry(acceptor.get_executor()) {}

  void accept();
  void serve(StreamProtocol::socket socket); // a new connection: its session, counted and started
  void run_io();
  std::vector<std::shared_ptr<Session>> snapshot();
};

namespace {

class ExchangeImpl final : public Exchange {
public:
  explicit ExchangeImpl(std::weak_ptr<Session> session) : m_session(std::move(session)) {}

  void respond(int status, const std::string& content_type, std::string body, const Headers& extra) override;
  void start_stream(int status, const std::string& content_type, const Headers& extra) override;
  bool send(std::string piece) override;
  using Exchange::finish;
  void finish(std::string last_piece) override;
  bool cancelled() const override { return m_cancelled.load(); }
  void on_cancel(std::function<void()> callback) override {
    {
      const std::lock_guard lock(m_mutex);
      if (!m_cancelled.load()) {
        m_callbacks.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }
  // Cancels the exchange and closes its connection: what is left after a handler failed midway
  // through a stream.
  void abort_connection();
  // The connection went away (or the server is stopping) before the response was complete.
  void cancel() {
    std::vector<std::function<void()>> callbacks;
    {
      const std::lock_guard lock(m_mutex);
      if (m_cancelled.exchange(true))
        return;
      callbacks.swap(m_callbacks);
    }
    for (auto& callback : callbacks)
      callback();
  }

private:
  enum class Phase { fresh, streaming, done };
  void advance(Phase from, Phase to, const char* what) {
    const std::lock_guard lock(m_mutex);
    if (m_phase != from)
      throw std::logic_error(std::string("http::Exchange: ") + what + " out of order");
    m_phase = to;
  }
  template <class Work> void post(Work&& work);

  std::weak_ptr<Session> m_session;
  std::atomic<bool> m_cancelled{false};
  std::mutex m_mutex;
  Phase m_phase = Phase::fresh;
  std::vector<std::function<void()>> m_callbacks;
};

// Runs the handler, on an I/O thread or the bulk lane. An exception answers 500 with its message;
// when a stream had already begun, all that is left is to drop the connection.
void
run_handler(const Handler& handler, const Request& request, const std::shared_ptr<ExchangeImpl>& exchange) {
  try {
    handler(request, exchange);
  } catch (const std::exception& e) {
    try {
      exchange->respond(500, "application/json", error_body(500, e.what()), {});
    } catch (const std::logic_error&) {
      exchange->abort_connection();
    }
  }
}

// One connection: reads a request, hands it to the handler, writes what the exchange sends, and
// reads the next request when the response is complete (keep-alive). All of its state is touched
// on its strand only.
class Session : public std::enable_shared_from_this<Session> {
public:
  Session(StreamProtocol::socket socket, std::shared_ptr<Server::State> server)
      : m_stream(std::move(socket)), m_server(std::move(server)), m_buffer(m_server->options.max_header_bytes) {}
  ~Session() {
    const std::lock_guard lock(m_server->mutex);
    --m_server->live_sessions;
  }

  auto executor() { return m_stream.get_executor(); }
  void run() {
    net::dispatch(executor(), [self = shared_from_this()] { self->read_request(); });
  }

  // The exchange's output, on the strand.
  void write_response(int status, const std::string& content_type, std::string body, const Headers& extra) {
    auto bytes = response_head(status, content_type, extra, keep_alive(), body.size());
    bytes += body;
    enqueue(std::move(bytes), true);
  }
  void write_stream_head(int status, const std::string& content_type, const Headers& extra) {
    enqueue(response_head(status, content_type, extra, keep_alive(), std::nullopt), false);
  }
  void write_chunk(std::string piece) { enqueue(chunk(piece), false); }
  void write_last_chunk(const std::string& last_piece) {
    enqueue(last_piece.empty() ? std::string("0\r\n\r\n") : chunk(last_piece) + "0\r\n\r\n", true);
  }

  // The server is stopping: close now when idle, else after the response in flight.
  void close_when_idle() {
    m_keep_alive = false;
    if (!m_exchange)
      close();
  }
  void close() {
    const auto held = std::move(m_held); // freed when this returns
    if (m_closed)
      return;
    m_closed = true;
    m_timer.cancel();
    if (m_exchange)
      m_exchange->cancel();
    beast::error_code ignored;
    m_stream.socket().shutdown(net::socket_base::shutdown_both, ignored);
    m_stream.socket().close(ignored);
  }

private:
  bool keep_alive() const { return m_keep_alive && !m_server->stopping.load(); }

  void read_request() {
    if (m_closed)
      return;
    m_parser.emplace();
    m_parser->header_limit(
        static_cast<std::uint32_t>(std::min<std::size_t>(m_server->options.max_header_bytes, UINT32_MAX)));
    m_parser->body_limit(m_server->options.max_body_bytes);
    m_stream.expires_after(m_server->options.idle_timeout);
    bhttp::async_read_header(m_stream, m_buffer, *m_parser,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec)
      return on_read_error(ec);
    // Refused from its Content-Length, before a 100 Continue: a client that waits for the
    // go-ahead (curl, for bodies over 1 KiB) then never sends the body.
    if (const auto length = m_parser->content_length(); length && *length > m_server->options.max_body_bytes)
      return reject_oversized_body();
    const auto expect = m_parser->get()[bhttp::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      // curl sends this before bodies over 1 KiB and waits for the go-ahead
      m_continue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(m_stream, net::buffer(m_continue),
                       [self = shared_from_this()](beast::error_code e, std::size_t) {
                         if (e)
                           return self->close();
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  // A body of known length is read up to 64 KiB at a time (Beast's largest read), a chunked one
  // through the header-sized buffer, which is what caps its chunk lines and trailers. Beast reads
  // no more than the buffer's free capacity, which after a header is about 1 KiB: without the
  // reserve, a 150 KB body took 125 reads, and the I/O thread spent 0.6 ms on it.
  void read_body() {
    m_body_deadline = std::chrono::steady_clock::now() + m_server->options.idle_timeout;
    m_stream.expires_at(m_body_deadline);
    if (!m_parser->chunked())
      m_buffer.max_size(std::max(m_server->options.max_header_bytes, kBodyReadBytes));
    const auto remaining = m_parser->content_length_remaining();
    if (!remaining || *remaining > m_buffer.size()) // more to read than the header's read brought
      m_buffer.reserve(m_buffer.max_size());
    read_body_part();
  }
  static constexpr std::size_t kBodyReadBytes = 64 * 1024;

  // One read, then the next when the body pace allows it. Every read's bytes count against the
  // pace, but the read that completes a body does not wait: a small body, or the end of a large
  // one, goes straight to its handler.
  void read_body_part() {
    if (m_parser->is_done())
      return body_read({});
    bhttp::async_read_some(m_stream, m_buffer, *m_parser,
                           [self = shared_from_this()](beast::error_code ec, std::size_t bytes) {
                             if (ec)
                               return self->body_read(ec);
                             const auto due = self->m_server->body_pace.after_reading(bytes);
                             if (self->m_parser->is_done())
                               return self->body_read({});
                             // The time the pace holds the body back is not the client's: its
                             // deadline moves by that much, no more (a trickling client is still cut).
                             const auto held = due - std::chrono::steady_clock::now();
                             if (held <= held.zero())
                               return self->read_body_part();
                             self->m_body_deadline += held;
                             self->wait_until(due, [self] {
                               self->m_stream.expires_at(self->m_body_deadline);
                               self->read_body_part();
                             });
                           });
  }

  void body_read(beast::error_code ec) {
    m_buffer.max_size(std::max(m_server->options.max_header_bytes, m_buffer.size()));
    if (m_buffer.size() == 0 && m_buffer.capacity() >= kBodyReadBytes)
      m_buffer.shrink_to_fit(); // an idle connection keeps no body-sized buffer
    on_request(ec);
  }

  // Runs `next` at once when `due` has come, else when it does; a cancelled wait (the server
  // stopping) closes the connection.
  template <class Next> void wait_until(BytePace::Clock::time_point due, Next next) {
    if (due <= BytePace::Clock::now())
      return next();
    m_timer.expires_at(due);
    m_timer.async_wait([self = shared_from_this(), next = std::move(next)](beast::error_code ec) mutable {
      if (ec)
        return self->close();
      next();
    });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == bhttp::error::body_limit)
      return reject_oversized_body();
    // The read buffer holds at most max_header_bytes: a header, a chunk's header line or a chunked
    // body's trailer block larger than that overflows it.
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow)
      return reject(431, "request headers or trailers are larger than the server's limit of " +
                             std::to_string(m_server->options.max_header_bytes) + " bytes");
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message)
      return reject(400, "malformed HTTP request: " + ec.message());
    close(); // end of stream, timeout, reset, or the server closing us
  }

  void reject_oversized_body() {
    reject(413, "request body is larger than the server's limit of " +
                    std::to_string(m_server->options.max_body_bytes) + " bytes");
  }

  void reject(int status, const std::string& message) {
    m_keep_alive = false;
    m_linger = true; // the client may still be sending the body we refused
    const auto body = error_body(status, message);
    enqueue(response_head(status, "application/json", {}, false, body.size()) + body, true);
  }

  void on_request(beast::error_code ec) {
    if (ec)
      return on_read_error(ec);
    m_stream.expires_never();
    auto& message = m_parser->get();
    // RFC 3986: a request target is ASCII; anything else is percent-encoded.
    const auto target = message.target();
    if (std::any_of(target.begin(), target.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
      return reject(400,
                    "malformed HTTP request: the request target holds bytes that are not ASCII (percent-encode them)");
    Request request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    for (const auto& field : message) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      request.headers[name] = std::string(field.value());
    }
    request.body = std::move(message.body());
    m_keep_alive = message.keep_alive();
    m_exchange = std::make_shared<ExchangeImpl>(weak_from_this());
    // The next request already read (pipelined in the same write): its bytes will not wake a wait
    // on the socket, and it is answered next, in order. Else a wait on the socket tells when the
    // client goes away.
    if (m_buffer.size() > 0)
      m_held = shared_from_this();
    else
      watch_for_disconnect();
    const auto exchange = m_exchange;
    if (m_server->bulk_lane && request.body.size() >= m_server->options.bulk_body_bytes)
      return hand_to_bulk_lane(std::move(request), exchange);
    run_handler(m_server->handler, request, exchange);
  }

  void hand_to_bulk_lane(Request request, const std::shared_ptr<ExchangeImpl>& exchange) {
    auto job = [state = m_server, request = std::move(request), exchange] {
      run_handler(state->handler, request, exchange);
    };
    if (!m_server->bulk_lane->post(std::move(job)))
      exchange->respond(503, "application/json",
                        error_body(503, "the server is busy with other large requests; retry shortly"),
                        {{"Retry-After", "1"}});
  }

  // While a request is being answered, a read-readiness wait tells a closed connection (readable
  // with nothing to read) from a pipelined next request (readable with bytes).
  void watch_for_disconnect() {
    m_watching = true;
    m_stream.socket().async_wait(net::socket_base::wait_read, [self = shared_from_this()](beast::error_code ec) {
      self->m_watching = false;
      // Set when the response ended while this wait was pending: the read of the next request
      // is this handler's to start, whichever way the wait ended.
      const bool resume = std::exchange(self->m_resume_read, false);
      if (ec == net::error::operation_aborted) {
        if (resume)
          self->read_request();
        return;
      }
      beast::error_code available_ec;
      const std::size_t available = self->m_stream.socket().available(available_ec);
      if (ec || available_ec || available == 0)
        return self->close(); // the client is gone: cancel its request
      // Bytes: the client's next request, read when this response ends. Sent the moment the
      // response ended, the wait completed before after_response() could cancel it: read now.
      // Sent earlier (pipelined), the session holds itself until the response ends: nothing else
      // would, and its socket would close under the request (a reset, as wrk showed).
      if (resume)
        self->read_request();
      else
        self->m_held = self;
    });
  }

  void enqueue(std::string bytes, bool last) {
    if (m_closed)
      return;
    m_queue.push_back(std::move(bytes));
    m_last_queued = m_last_queued || last;
    if (!m_writing)
      write_next();
  }

  void write_next() {
    if (m_queue.empty()) {
      m_writing = false;
      if (m_last_queued)
        after_response();
      return;
    }
    m_writing = true;
    m_out.clear();
    while (!m_queue.empty()) { // coalesce what the engine produced meanwhile into one write
      m_out += m_queue.front();
      m_queue.pop_front();
    }
    m_stream.expires_after(m_server->options.idle_timeout);
    net::async_write(m_stream, net::buffer(m_out), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec)
        return self->close();
      self->m_stream.expires_never();
      self->write_next();
    });
  }

  void after_response() {
    const auto held = std::move(m_held); // freed when this returns
    m_last_queued = false;
    m_exchange.reset();
    if (m_linger)
      return linger();
    if (!keep_alive())
      return close();
    if (m_watching) {
      m_resume_read = true;
      beast::error_code ignored;
      m_stream.socket().cancel(ignored); // the watch completes with operation_aborted, then reads
      return;
    }
    read_request();
  }

  // After refusing a request whose body is still arriving: stop sending, read and discard what
  // comes (up to a bound, each read within 5 s, at the body pace) so the client can finish its
  // write and read the refusal, then close. Closing at once would reset the connection, and most
  // clients would report a broken pipe instead of the 413 (the lingering close of nginx and Apache).
  // Paced, a client resending over-cap bodies as fast as it can is held back by TCP's flow control
  // (perf_serve_hostile over-cap: 2.6 GB/s of refused bytes on 2 connections had the victim's p99
  // at 21-38× idle; paced, about 1×).
  void linger() {
    beast::error_code ignored;
    m_stream.socket().shutdown(net::socket_base::shutdown_send, ignored);
    m_drain.resize(kDrainReadBytes);
    m_drained = 0;
    drain();
  }
  // The bytes a refused body may still send; beyond them the connection closes.
  static constexpr std::size_t kDrainBudgetBytes = std::size_t{256} << 20;
  static constexpr std::size_t kDrainReadBytes = 64 * 1024;

  // Receives with MSG_TRUNC: TCP then drops the bytes in the kernel instead of copying them out
  // (tcp(7)); a local (Unix) stream ignores the flag and copies into the buffer. A direct socket
  // read has no basic_stream timeout, hence the timer.
  void drain() {
    m_timer.expires_after(std::chrono::seconds(5));
    m_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec)
        self->close();
    });
    m_stream.socket().async_receive(
        net::buffer(m_drain), MSG_TRUNC, [self = shared_from_this()](beast::error_code ec, std::size_t n) {
          self->m_timer.cancel();
          self->m_drained += n;
          if (ec || self->m_drained >= kDrainBudgetBytes)
            return self->close();
          self->wait_until(self->m_server->body_pace.after_reading(n), [self] { self->drain(); });
        });
  }

  beast::basic_stream<StreamProtocol> m_stream;
  net::steady_timer m_timer{m_stream.get_executor()}; // a drain read's deadline, or the body pace's wait
  std::size_t m_drained = 0;
  std::chrono::steady_clock::time_point m_body_deadline; // the body's idle deadline, moved by the pace's waits
  std::shared_ptr<Server::State> m_server;
  beast::flat_buffer m_buffer; // capped at max_header_bytes, see on_read_error
  std::optional<bhttp::request_parser<bhttp::string_body>> m_parser;
  std::shared_ptr<ExchangeImpl> m_exchange;
  std::shared_ptr<Session> m_held; // itself, while a response is pending and no wait holds it
  std::deque<std::string> m_queue;
  std::string m_out, m_continue, m_drain;
  bool m_writing = false, m_last_queued = false, m_keep_alive = false, m_watching = false, m_resume_read = false,
       m_closed = false, m_linger = false;
};

template <class Work>
void
ExchangeImpl::post(Work&& work) {
  if (const auto session = m_session.lock())
    net::post(session->executor(), [session, work = std::forward<Work>(work)]() mutable { work(*session); });
}

void
ExchangeImpl::abort_connection() {
  cancel();
  post([](Session& s) { s.close(); });
}

void
ExchangeImpl::respond(int status, const std::string& content_type, std::string body, const Headers& extra) {
  advance(Phase::fresh, Phase::done, "respond()");
  post([status, content_type, body = std::move(body), extra](Session& s) mutable {
    s.write_response(status, content_type, std::move(body), extra);
  });
}

void
ExchangeImpl::start_stream(int status, const std::string& content_type, const Headers& extra) {
  advance(Phase::fresh, Phase::streaming, "start_stream()");
  post([status, content_type, extra](Session& s) { s.write_stream_head(status, content_type, extra); });
}

bool
ExchangeImpl::send(std::string piece) {
  if (m_cancelled.load())
    return false;
  {
    const std::lock_guard lock(m_mutex);
    if (m_phase != Phase::streaming)
      throw std::logic_error("http::Exchange: send() outside a stream");
  }
  if (!piece.empty()) // an empty chunk would end the stream
    post([piece = std::move(piece)](Session& s) mutable { s.write_chunk(std::move(piece)); });
  return true;
}

void
ExchangeImpl::finish(std::string last_piece) {
  advance(Phase::streaming, Phase::done, "finish()");
  post([last_piece = std::move(last_piece)](Session& s) { s.write_last_chunk(last_piece); });
}

} // namespace

void
Server::State::accept() {
  acceptor.async_accept(net::make_strand(ioc), [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    if (self->stopping.load())
      return;
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) and the like: the connection stays in the backlog, so
      // accepting again at once would spin a core until a descriptor frees up. Pause instead.
      ++self->accept_failures;
      self->accept_retry.expires_after(std::chrono::milliseconds(50));
      self->accept_retry.async_wait([self](beast::error_code wait_ec) {
        if (!wait_ec && !self->stopping.load())
          self->accept();
      });
      return;
    }
    // Streams are many small writes: without TCP_NODELAY, Nagle's algorithm and the client's
    // delayed ACK hold each token back for up to 40 ms.
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    self->serve(StreamProtocol::socket(std::move(socket)));
    self->accept();
  });
}

void
Server::State::serve(StreamProtocol::socket socket) {
  auto session = std::make_shared<Session>(std::move(socket), shared_from_this());
  {
    const std::lock_guard lock(mutex);
    ++live_sessions;
    std::erase_if(sessions, [](const auto& weak) { return weak.expired(); });
    sessions.push_back(session);
  }
  session->run();
}

// Runs the io_context on this thread until it is stopped. An exception out of a completion handler
// (a defect: a request's own failures are answered in its session) ends the connection whose
// handler threw, whose state unwinds with it, and never the server.
void
Server::State::run_io() {
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      log::error("http server: a connection ended on an unexpected exception: {}", e.what());
    }
  }
}

std::vector<std::shared_ptr<Session>>
Server::State::snapshot() {
  const std::lock_guard lock(mutex);
  std::vector<std::shared_ptr<Session>> alive;
  for (const auto& weak : sessions)
    if (auto session = weak.lock())
      alive.push_back(std::move(session));
  return alive;
}

Server::Server(ServerOptions options, Handler handler)
    : m_state(std::make_shared<State>(std::move(options), std::move(handler))) {
  State& s = *m_state;
  // Beast keeps a field's length in 16 bits and throws on a longer one; the read buffer, capped at
  // max_header_bytes, keeps every field shorter.
  if (s.options.max_header_bytes < 1024 || s.options.max_header_bytes > 65535)
    throw InputError(
        fmt::format("http server: max_header_bytes {} is outside 1024..65535", s.options.max_header_bytes));
  const std::string where = s.options.host + ":" + std::to_string(s.options.port);
  try {
    const auto address = net::ip::make_address(s.options.host);
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(s.options.port));
    s.acceptor.open(endpoint.protocol());
    s.acceptor.set_option(net::socket_base::reuse_address(true));
    s.acceptor.bind(endpoint);
    s.acceptor.listen(net::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw RuntimeFailure("cannot listen on " + where + ": " + e.code().message() +
                         (e.code() == net::error::address_in_use ? " (pick another --port, or 0 for a free one)" : ""));
  }
}

Server::~Server() {
  stop(std::chrono::milliseconds(0));
}

int
Server::port() const {
  beast::error_code ec;
  const auto endpoint = m_state->acceptor.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

void
Server::start() {
  State& s = *m_state;
  s.accept();
  for (int i = 0; i < std::max(1, s.options.threads); ++i)
    s.threads.emplace_back([state = m_state] { state->run_io(); });
}

int
Server::open_local_connection() {
  State& s = *m_state;
  if (s.stopping.load())
    throw RuntimeFailure("http server: a local connection was asked for while the server stops");
  net::local::stream_protocol::socket server_end(net::make_strand(s.ioc));
  net::local::stream_protocol::socket client_end(s.ioc);
  net::local::connect_pair(server_end, client_end);
  s.serve(StreamProtocol::socket(std::move(server_end)));
  return client_end.release();
}

void
Server::stop(std::chrono::milliseconds grace, const std::function<bool()>& cut_grace_short) {
  State& s = *m_state;
  if (s.stopped.exchange(true))
    return;
  s.stopping = true;
  net::post(s.acceptor.get_executor(), [state = m_state] {
    beast::error_code ignored;
    state->acceptor.close(ignored);
    state->accept_retry.cancel();
  });
  for (const auto& session : s.snapshot())
    net::post(session->executor(), [session] { session->close_when_idle(); });
  const auto wait_until_closed = [&](std::chrono::steady_clock::time_point deadline, const std::function<bool()>& cut) {
    while (open_connections() > 0 && std::chrono::steady_clock::now() < deadline && !s.threads.empty() &&
           !(cut && cut()))
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  wait_until_closed(std::chrono::steady_clock::now() + grace, cut_grace_short);
  for (const auto& session : s.snapshot())
    net::post(session->executor(), [session] { session->close(); });
  wait_until_closed(std::chrono::steady_clock::now() + std::chrono::seconds(2), {});
  if (s.bulk_lane)
    s.bulk_lane->stop(); // the requests it had not started are gone with their connections
  s.ioc.stop();
  for (auto& thread : s.threads)
    if (thread.joinable())
      thread.join();
  s.threads.clear();
  // Run what is left (the aborted accept and reads): their handlers hold the state and sessions
  // through shared pointers, a cycle through the io_context that would otherwise never be freed.
  s.ioc.restart();
  for (int round = 0; round < 1000 && s.ioc.poll() > 0; ++round) {
  }
}

std::uint64_t
Server::accept_failures() const {
  return m_state->accept_failures.load();
}

std::size_t
Server::open_connections() const {
  const std::lock_guard lock(m_state->mutex);
  return m_state->live_sessions;
}

} // namespace optkit::http
