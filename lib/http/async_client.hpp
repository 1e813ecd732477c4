// The asynchronous side of optkit's HTTP client: many requests in flight over a pool of
// keep-alive connections on one io_context, for load generation (bench) where a thread per
// request cannot keep up. Bodies of 2xx answers are handed over as they arrive; while the client
// lives every request ends with exactly one on_done, whatever happens on the wire (refused
// connection, timeout, cut-off body).
#pragma once

#include "http/client.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace optkit::http {

struct AsyncRequest {
  std::string method = "POST";
  std::string path; // appended to the base URL's prefix
  std::string body;
  std::string content_type = "application/json";
  // The client gives the request up this long after it starts (a user closing the tab): the
  // connection is dropped and the request ends as cancelled, not failed. Unset, or not shorter
  // than the request timeout: never.
  std::optional<std::chrono::milliseconds> abandon_after;
};

struct AsyncResult {
  int status = 0;         // 0 when no response arrived
  std::string error;      // empty on a complete response (any status)
  std::string body;       // the body of a non-2xx response (capped at 64 KiB)
  bool cancelled = false; // on_data returned false, or the request was abandoned (abandon_after)
};

struct AsyncHandlers {
  // Called on the I/O thread when the request's first byte goes on the wire.
  std::function<void()> on_send;
  // Body pieces of a 2xx response; returning false drops the connection (the server sees a
  // disconnect) and ends the request as cancelled.
  std::function<bool(std::string_view)> on_data;
  std::function<void(AsyncResult)> on_done;
};

struct AsyncClientOptions {
  ClientOptions client;               // timeouts (per request) and headers
  std::size_t max_connections = 4096; // requests beyond this wait for a free connection
  // New connections being opened at once; a request that finds none idle and this many opening
  // waits for whichever frees first (a finished request or a completed connect). Bounds the
  // connect storm a stalled server would otherwise trigger: each connect costs both ends more
  // than reusing a connection, so without it a short stall feeds on itself.
  std::size_t max_opening = 16;
  int threads = 1; // I/O threads
};

class AsyncClient {
public:
  // Resolves the host at once (RuntimeFailure naming the URL when it cannot) and starts the
  // I/O threads.
  AsyncClient(Url base, AsyncClientOptions options = {});
  // Stops: requests in flight or waiting for a connection end with an error "client stopped";
  // one submitted an instant before, whose start had not run yet, is dropped without on_done.
  ~AsyncClient();
  AsyncClient(const AsyncClient&) = delete;
  AsyncClient& operator=(const AsyncClient&) = delete;

  // Thread-safe; the request starts on an I/O thread as soon as a connection is free.
  void submit(AsyncRequest request, AsyncHandlers handlers);
  // Requests submitted and not yet done.
  std::size_t in_flight() const;
  std::size_t open_connections() const;
  // Ends every request in flight (on_done with an error) and closes all connections; the client
  // can be used again afterwards.
  void cancel_all();

  const Url& url() const;

  struct Impl;

private:
  std::shared_ptr<Impl> m;
};

} // namespace optkit::http
