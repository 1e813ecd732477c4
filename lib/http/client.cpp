#include "http/client.hpp"

#include "core/error.hpp"
#include "core/interrupt.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <optional>

namespace optkit::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

Url
parse_url(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return InputError("URL '" + text + "': " + why + " (expected http://HOST[:PORT][/PATH])");
  };
  constexpr std::string_view scheme = "http://";
  if (text.rfind("https://", 0) == 0)
    throw bad("https is not supported (this build has no TLS): use a plain-HTTP port or a TLS-terminating proxy");
  if (text.rfind(scheme, 0) != 0)
    throw bad("no http:// scheme");
  Url url;
  url.text = text;
  std::string_view rest = std::string_view(text).substr(scheme.size());
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.empty())
    throw bad("no host");
  if (authority.find('@') != std::string_view::npos)
    throw bad("user:password@ is not supported; pass credentials with --api-key");
  std::string_view port_text;
  if (authority.front() == '[') { // [::1]:8000
    const auto close = authority.find(']');
    if (close == std::string_view::npos)
      throw bad("unterminated IPv6 address");
    url.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':')
        throw bad("unexpected text after the IPv6 address");
      port_text = authority.substr(close + 2);
    }
  } else {
    const auto colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos)
      port_text = authority.substr(colon + 1);
  }
  if (url.host.empty())
    throw bad("no host");
  if (!port_text.empty()) {
    int port = 0;
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc{} || end != port_text.data() + port_text.size() || port < 1 || port > 65535)
      throw bad("port '" + std::string(port_text) + "' is not a number in 1-65535");
    url.port = port;
  }
  while (!path.empty() && path.back() == '/')
    path.remove_suffix(1);
  url.prefix = std::string(path);
  return url;
}

struct Client::Impl {
  Url url;
  ClientOptions options;
  net::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  std::string where() const { return url.text; }

  // Runs one asynchronous operation to completion on the private io_context: the way to get
  // timeouts (beast::tcp_stream honours them on asynchronous operations only), and to abandon it
  // on an interrupt.
  template <class Start> beast::error_code run(Start&& start) {
    beast::error_code result;
    bool done = false;
    start([&](beast::error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    ioc.restart();
    bool abandoned = false;
    while (!done && !ioc.stopped()) {
      ioc.run_one_for(std::chrono::milliseconds(100));
      if (!done && !abandoned && options.stop_on_interrupt && interrupt_requested() && stream) {
        stream->cancel(); // the operation completes now, aborted
        abandoned = true;
      }
    }
    if (abandoned) {
      drop();
      throw Interrupted("interrupted during a request to " + where());
    }
    return result;
  }

  void connect() {
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    const auto endpoints = resolver.resolve(url.host, std::to_string(url.port), ec);
    if (ec)
      throw RuntimeFailure("cannot resolve " + url.host + " (" + where() + "): " + ec.message());
    stream.emplace(ioc);
    stream->expires_after(options.connect_timeout);
    ec = run([&](auto handler) {
      stream->async_connect(endpoints, [handler](beast::error_code e, auto) mutable { handler(e); });
    });
    if (ec) {
      stream.reset();
      throw RuntimeFailure("cannot connect to " + where() + ": " +
                           (ec == beast::error::timeout ? "timed out" : ec.message()));
    }
    stream->socket().set_option(tcp::no_delay(true));
    buffer.clear();
  }

  void drop() {
    if (stream) {
      beast::error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream->socket().close(ignored);
      stream.reset();
    }
  }

  Response exchange(const std::string& method, const std::string& path, const std::string& body,
                    const std::string& content_type, const std::function<bool(std::string_view)>* on_data) {
    bhttp::request<bhttp::string_body> request;
    request.method_string(method);
    request.target(url.prefix + path);
    request.version(11);
    request.set(bhttp::field::host, url.host + ":" + std::to_string(url.port));
    request.set(bhttp::field::user_agent, "optkit");
    for (const auto& [name, value] : options.headers)
      request.set(name, value);
    if (!body.empty() || method == "POST" || method == "PUT") {
      request.set(bhttp::field::content_type, content_type);
      request.body() = body;
      request.prepare_payload();
    }
    // A kept-alive connection the server closed meanwhile fails before any response byte:
    // then, and only then, the request is sent again on a fresh connection.
    for (int attempt = 0;; ++attempt) {
      const bool reused = stream.has_value();
      if (!stream)
        connect();
      const auto deadline = std::chrono::steady_clock::now() + options.request_timeout;
      stream->expires_at(deadline);
      auto ec = run([&](auto handler) { bhttp::async_write(*stream, request, handler); });
      bhttp::response_parser<bhttp::buffer_body> parser;
      parser.body_limit(std::numeric_limits<std::uint64_t>::max()); // (boost::none misbehaves in Boost 1.74)
      if (!ec)
        ec = run([&](auto handler) { bhttp::async_read_header(*stream, buffer, parser, handler); });
      if (ec) {
        drop();
        const bool stale = reused && attempt == 0 &&
                           (ec == bhttp::error::end_of_stream || ec == net::error::connection_reset ||
                            ec == net::error::broken_pipe || ec == net::error::eof);
        if (stale)
          continue;
        throw RuntimeFailure(method + " " + where() + path + ": " +
                             (ec == beast::error::timeout ? "no response within the request timeout" : ec.message()));
      }
      Response response;
      response.status = static_cast<int>(parser.get().result_int());
      for (const auto& field : parser.get()) {
        std::string name(field.name_string());
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        response.headers[name] = std::string(field.value());
      }
      const bool deliver = on_data != nullptr && response.status >= 200 && response.status < 300;
      char piece[16384];
      while (!parser.is_done()) {
        parser.get().body().data = piece;
        parser.get().body().size = sizeof piece;
        ec = run([&](auto handler) { bhttp::async_read_some(*stream, buffer, parser, handler); });
        if (ec == bhttp::error::need_buffer)
          ec = {};
        const std::size_t got = sizeof piece - parser.get().body().size;
        if (got > 0) {
          if (deliver) {
            if (!(*on_data)(std::string_view(piece, got))) {
              drop(); // the caller stopped reading: the server sees the disconnect
              return response;
            }
          } else {
            response.body.append(piece, got);
          }
        }
        if (ec) {
          drop();
          throw RuntimeFailure(method + " " + where() + path +
                               ": response cut off: " + (ec == beast::error::timeout ? "timed out" : ec.message()));
        }
      }
      if (!parser.keep_alive())
        drop();
      return response;
    }
  }
};

Client::Client(Url base, ClientOptions options) : m(std::make_unique<Impl>()) {
  m->url = std::move(base);
  m->options = std::move(options);
}

Client::~Client() {
  m->drop();
}

Response
Client::request(const std::string& method, const std::string& path, const std::string& body,
                const std::string& content_type) {
  return m->exchange(method, path, body, content_type, nullptr);
}

Response
Client::stream(const std::string& method, const std::string& path, const std::string& body,
               const std::function<bool(std::string_view)>& on_data, const std::string& content_type) {
  return m->exchange(method, path, body, content_type, &on_data);
}

const Url&
Client::url() const {
  return m->url;
}

} // namespace optkit::http
