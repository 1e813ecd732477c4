// The HTTP/1.1 client every optkit tool that talks to a server uses (bench, eval, tune, flow):
// one keep-alive connection per Client, blocking calls with connect and request timeouts, and
// streamed bodies handed over as they arrive (with SseParser, token by token). One Client per
// thread; make as many as the load needs.
#pragma once

#include "http/server.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace optkit::http {

// http://host[:port][/prefix]. Throws InputError naming the text when it is not one (https://
// included: this build has no TLS, so a TLS-terminating proxy or a plain-HTTP port is needed).
struct Url {
  std::string host;
  int port = 80;
  std::string prefix; // path prefix without a trailing '/', e.g. "/v1" or ""
  std::string text;   // as given
};
Url parse_url(const std::string& text);

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{600'000}; // whole request, streamed or not
  Headers headers;                                    // sent with every request (Authorization, ...)
  // Ctrl-C or SIGTERM (core/interrupt.hpp) abandons the call within a tenth of a second, which
  // then throws Interrupted.
  bool stop_on_interrupt = true;
};

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers; // names in lower case
  std::string body;                           // for stream(): only when the status is not 2xx
};

class Client {
public:
  explicit Client(Url base, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Throws RuntimeFailure naming the URL when the server cannot be reached or times out.
  Response request(const std::string& method, const std::string& path, const std::string& body = {},
                   const std::string& content_type = "application/json");
  // The body is handed to on_data piece by piece as it arrives; on_data returning false drops
  // the connection (the server sees a disconnect and cancels the request).
  Response stream(const std::string& method, const std::string& path, const std::string& body,
                  const std::function<bool(std::string_view)>& on_data,
                  const std::string& content_type = "application/json");

  const Url& url() const;

private:
  struct Impl;
  std::unique_ptr<Impl> m;
};

} // namespace optkit::http
