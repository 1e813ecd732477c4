#include "http/async_client.hpp"

#include "core/error.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

namespace optkit::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr std::size_t max_error_body = 64 * 1024;

struct Job {
  AsyncRequest request;
  AsyncHandlers handlers;
};

} // namespace

struct Connection;

struct AsyncClient::Impl : std::enable_shared_from_this<AsyncClient::Impl> {
  Url url;
  AsyncClientOptions options;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::resolver::results_type endpoints;
  std::vector<std::thread> threads;

  mutable std::mutex mutex;
  std::deque<Job> waiting;                              // no free connection yet
  std::vector<std::shared_ptr<Connection>> idle;        // connected, kept alive
  std::unordered_set<std::shared_ptr<Connection>> busy; // a request in flight
  std::size_t opening = 0;                              // new connections not yet connected
  std::size_t submitted_not_done = 0;

  void start(Job job);
  void release(const std::shared_ptr<Connection>& connection, bool keep);
  // A new connection finished connecting (or failed to): a waiting request may open the next.
  void opened();
};

// One TCP connection on its own strand, carrying one request at a time.
struct Connection : std::enable_shared_from_this<Connection> {
  std::weak_ptr<AsyncClient::Impl> owner;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  bool connected = false;
  bool opening = false; // counted in the client's `opening` until its first connect completes
  bool reused = false;
  bool retried = false;
  bhttp::request<bhttp::string_body> request;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser;
  Job job;
  AsyncResult result;
  bool deliver = false;
  bool abandoning = false; // the timer is the request's abandon_after, not its timeout
  char piece[16384];

  Connection(const std::shared_ptr<AsyncClient::Impl>& impl) : owner(impl), stream(net::make_strand(impl->ioc)) {}

  const AsyncClient::Impl& impl() const { return *owner.lock(); }

  void begin(Job next) {
    job = std::move(next);
    result = {};
    retried = false;
    auto self = shared_from_this();
    auto impl_ptr = owner.lock();
    if (!impl_ptr)
      return finish("client stopped", false);
    const auto& url = impl_ptr->url;
    request = {};
    request.method_string(job.request.method);
    request.target(url.prefix + job.request.path);
    request.version(11);
    request.set(bhttp::field::host, url.host + ":" + std::to_string(url.port));
    request.set(bhttp::field::user_agent, "optkit");
    for (const auto& [name, value] : impl_ptr->options.client.headers)
      request.set(name, value);
    if (!job.request.body.empty() || job.request.method == "POST" || job.request.method == "PUT") {
      request.set(bhttp::field::content_type, job.request.content_type);
      request.body() = job.request.body;
      request.prepare_payload();
    }
    // The stream's timer is set on its strand, like every other operation on it: with several
    // I/O threads the caller may be another connection's handler on another thread.
    const auto timeout = impl_ptr->options.client.request_timeout;
    abandoning = job.request.abandon_after && *job.request.abandon_after < timeout;
    net::dispatch(stream.get_executor(), [self, timer = abandoning ? *job.request.abandon_after : timeout] {
      self->stream.expires_after(timer);
      self->send();
    });
  }

  void send() {
    reused = connected;
    if (!connected) {
      auto impl_ptr = owner.lock();
      if (!impl_ptr)
        return finish("client stopped", false);
      stream.async_connect(impl_ptr->endpoints, [self = shared_from_this()](beast::error_code ec, auto) {
        if (self->opening) {
          self->opening = false;
          if (auto impl = self->owner.lock())
            impl->opened();
        }
        if (self->abandoned(ec))
          return;
        if (ec)
          return self->finish(ec == beast::error::timeout ? "connect timed out" : "connect: " + ec.message(), false);
        beast::error_code ignored;
        self->stream.socket().set_option(tcp::no_delay(true), ignored);
        self->connected = true;
        self->write();
      });
      return;
    }
    write();
  }

  void write() {
    if (job.handlers.on_send)
      job.handlers.on_send();
    bhttp::async_write(stream, request, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec)
        return self->failed_before_response(ec);
      self->parser.emplace();
      self->parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      bhttp::async_read_header(self->stream, self->buffer, *self->parser,
                               [self](beast::error_code e, std::size_t) { self->on_header(e); });
    });
  }

  // A kept-alive connection the server closed meanwhile fails before any response byte: then,
  // and only then, the request goes again on a fresh connection (as the blocking client does).
  void failed_before_response(beast::error_code ec) {
    if (abandoned(ec))
      return;
    const bool stale = reused && !retried &&
                       (ec == bhttp::error::end_of_stream || ec == net::error::connection_reset ||
                        ec == net::error::broken_pipe || ec == net::error::eof);
    close();
    if (stale) {
      retried = true;
      reused = false;
      send();
      return;
    }
    finish(ec == beast::error::timeout ? "no response within the request timeout" : ec.message(), false);
  }

  void on_header(beast::error_code ec) {
    if (ec)
      return failed_before_response(ec);
    result.status = static_cast<int>(parser->get().result_int());
    deliver = result.status >= 200 && result.status < 300 && job.handlers.on_data;
    read_body();
  }

  void read_body() {
    if (parser->is_done())
      return finish("", parser->keep_alive());
    parser->get().body().data = piece;
    parser->get().body().size = sizeof piece;
    bhttp::async_read_some(stream, buffer, *parser, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec == bhttp::error::need_buffer)
        ec = {};
      const std::size_t got = sizeof self->piece - self->parser->get().body().size;
      if (got > 0) {
        if (self->deliver) {
          if (!self->job.handlers.on_data(std::string_view(self->piece, got))) {
            self->result.cancelled = true;
            return self->finish("", false);
          }
        } else if (self->result.body.size() < max_error_body) {
          self->result.body.append(self->piece, std::min(got, max_error_body - self->result.body.size()));
        }
      }
      if (self->abandoned(ec))
        return;
      if (ec)
        return self->finish(
            std::string("response cut off: ") + (ec == beast::error::timeout ? "timed out" : ec.message()), false);
      self->read_body();
    });
  }

  // Whether the timer that fired was the request's abandon_after: it then ends as cancelled.
  bool abandoned(beast::error_code ec) {
    if (ec != beast::error::timeout || !abandoning)
      return false;
    result.cancelled = true;
    finish("", false);
    return true;
  }

  void close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
    connected = false;
    buffer.clear();
  }

  void finish(std::string error, bool keep) {
    result.error = std::move(error);
    if (!keep)
      close();
    auto done = std::move(job.handlers.on_done);
    job = {};
    AsyncResult out = std::move(result);
    result = {};
    if (auto impl_ptr = owner.lock())
      impl_ptr->release(shared_from_this(), keep);
    if (done)
      done(std::move(out));
  }
};

void
AsyncClient::Impl::start(Job job) {
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard lock(mutex);
    if (!idle.empty()) {
      connection = std::move(idle.back());
      idle.pop_back();
    } else if (busy.size() < options.max_connections && opening < std::max<std::size_t>(1, options.max_opening)) {
      connection = std::make_shared<Connection>(shared_from_this());
      connection->opening = true;
      ++opening;
    } else {
      waiting.push_back(std::move(job));
      return;
    }
    busy.insert(connection);
  }
  connection->begin(std::move(job));
}

void
AsyncClient::Impl::release(const std::shared_ptr<Connection>& connection, bool keep) {
  std::optional<Job> next;
  {
    std::lock_guard lock(mutex);
    --submitted_not_done;
    if (!waiting.empty()) {
      next = std::move(waiting.front());
      waiting.pop_front();
    } else {
      busy.erase(connection);
      if (keep)
        idle.push_back(connection);
    }
  }
  if (next) // the connection stays busy and takes the next request (after this one's on_done)
    net::post(connection->stream.get_executor(),
              [connection, job = std::move(*next)]() mutable { connection->begin(std::move(job)); });
}

void
AsyncClient::Impl::opened() {
  std::optional<Job> next;
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard lock(mutex);
    --opening;
    if (!waiting.empty() && idle.empty() && busy.size() < options.max_connections) {
      next = std::move(waiting.front());
      waiting.pop_front();
      connection = std::make_shared<Connection>(shared_from_this());
      connection->opening = true;
      ++opening;
      busy.insert(connection);
    }
  }
  if (next)
    connection->begin(std::move(*next));
}

AsyncClient::AsyncClient(Url base, AsyncClientOptions options) : m(std::make_shared<Impl>()) {
  m->url = std::move(base);
  m->options = std::move(options);
  if (m->options.max_connections == 0)
    m->options.max_connections = 1;
  tcp::resolver resolver(m->ioc);
  beast::error_code ec;
  m->endpoints = resolver.resolve(m->url.host, std::to_string(m->url.port), ec);
  if (ec)
    throw RuntimeFailure("cannot resolve " + m->url.host + " (" + m->url.text + "): " + ec.message());
  m->work.emplace(m->ioc.get_executor());
  for (int i = 0; i < std::max(1, m->options.threads); ++i)
    m->threads.emplace_back([impl = m.get()] { impl->ioc.run(); });
}

AsyncClient::~AsyncClient() {
  cancel_all();
  m->work.reset();
  m->ioc.stop();
  for (auto& thread : m->threads)
    thread.join();
  // Handlers that never ran still hold jobs: end them so every request sees on_done.
  std::deque<Job> left;
  {
    std::lock_guard lock(m->mutex);
    left.swap(m->waiting);
    for (const auto& connection : m->busy)
      if (connection->job.handlers.on_done)
        left.push_back(std::move(connection->job));
  }
  for (auto& job : left)
    if (job.handlers.on_done)
      job.handlers.on_done(AsyncResult{0, "client stopped", {}, false});
}

void
AsyncClient::submit(AsyncRequest request, AsyncHandlers handlers) {
  {
    std::lock_guard lock(m->mutex);
    ++m->submitted_not_done;
  }
  // A weak reference: a handler still queued when the client goes away must not keep the
  // io_context that holds it alive (a reference cycle).
  net::post(m->ioc, [weak = std::weak_ptr<Impl>(m), job = Job{std::move(request), std::move(handlers)}]() mutable {
    if (const auto impl = weak.lock())
      impl->start(std::move(job));
  });
}

std::size_t
AsyncClient::in_flight() const {
  std::lock_guard lock(m->mutex);
  return m->submitted_not_done;
}

std::size_t
AsyncClient::open_connections() const {
  std::lock_guard lock(m->mutex);
  return m->busy.size() + m->idle.size();
}

void
AsyncClient::cancel_all() {
  std::deque<Job> dropped;
  std::vector<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(m->mutex);
    dropped.swap(m->waiting);
    m->submitted_not_done -= dropped.size();
    connections.assign(m->busy.begin(), m->busy.end());
    connections.insert(connections.end(), m->idle.begin(), m->idle.end());
    m->idle.clear();
  }
  for (auto& job : dropped)
    if (job.handlers.on_done)
      job.handlers.on_done(AsyncResult{0, "cancelled", {}, false});
  // Closing a busy connection's socket makes its pending operation fail, which ends its request.
  for (auto& connection : connections)
    net::post(connection->stream.get_executor(), [connection] { connection->close(); });
}

const Url&
AsyncClient::url() const {
  return m->url;
}

} // namespace optkit::http
