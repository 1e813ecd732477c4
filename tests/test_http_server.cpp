// lib/http's server and client together on loopback: keep-alive, caps, streaming, a client that
// goes away, handler errors, a graceful stop, and what raw bytes a server must survive. Servers
// bind 127.0.0.1 on a free port. No test waits on a speed: each waits for an event, with a
// deadline far beyond it (the body pace's test checks a lower bound only).
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "http/client.hpp"
#include "http/server.hpp"
#include "http/sse.hpp"

#include <boost/asio.hpp>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace optkit;
using namespace optkit::http;
using namespace std::chrono_literals;

namespace {

// Waits for `done` to hold, polling; false after `limit` (a deadline, not an expected duration).
template <class Condition>
bool
eventually(Condition done, std::chrono::milliseconds limit = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

Url
local(const Server& server) {
  return parse_url("http://127.0.0.1:" + std::to_string(server.port()));
}

// Sends raw bytes on a fresh connection (then ends its sending side, with `half_close`) and returns
// everything the server answers until it closes.
std::string
raw_exchange(int port, const std::string& bytes, bool half_close = false) {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  boost::asio::write(socket, boost::asio::buffer(bytes));
  if (half_close)
    socket.shutdown(boost::asio::ip::tcp::socket::shutdown_send);
  std::string answer;
  char buffer[4096];
  boost::system::error_code ec;
  while (!ec) {
    const auto n = socket.read_some(boost::asio::buffer(buffer), ec);
    answer.append(buffer, n);
  }
  return answer;
}

} // namespace

TEST_CASE("URLs: host, port, prefix; what is not a plain-HTTP URL is refused by name") {
  const Url url = parse_url("http://127.0.0.1:8000/v1/");
  CHECK(url.host == "127.0.0.1");
  CHECK(url.port == 8000);
  CHECK(url.prefix == "/v1");
  CHECK(parse_url("http://localhost").port == 80);
  CHECK(parse_url("http://[::1]:9000").host == "::1");
  CHECK_THROWS_WITH_AS(parse_url("https://api.openai.com/v1"), doctest::Contains("no TLS"), InputError);
  CHECK_THROWS_WITH_AS(parse_url("localhost:8000"), doctest::Contains("'localhost:8000'"), InputError);
  CHECK_THROWS_WITH_AS(parse_url("http://h:99999"), doctest::Contains("port '99999'"), InputError);
  CHECK_THROWS_AS(parse_url("http://:80"), InputError);
}

TEST_CASE("requests and responses on one kept-alive connection; bodies and headers arrive intact") {
  Server server({}, [](const Request& request, const std::shared_ptr<Exchange>& exchange) {
    const nlohmann::json echo = {{"method", request.method},
                                 {"path", request.path()},
                                 {"target", request.target},
                                 {"auth", request.header("authorization")},
                                 {"body", request.body}};
    exchange->respond(200, "application/json", echo.dump(), {{"X-Request-Id", "r1"}});
  });
  server.start();
  ClientOptions options;
  options.headers = {{"Authorization", "Bearer k"}};
  Client client(parse_url("http://127.0.0.1:" + std::to_string(server.port()) + "/v1"), options);
  for (int i = 0; i < 3; ++i) {
    const std::string body = std::string(100'000, 'x') + std::to_string(i);
    const Response r = client.request("POST", "/completions?x=1", body);
    CHECK(r.status == 200);
    CHECK(r.headers.at("x-request-id") == "r1");
    const auto echo = nlohmann::json::parse(r.body);
    CHECK(echo["method"] == "POST");
    CHECK(echo["path"] == "/v1/completions");
    CHECK(echo["target"] == "/v1/completions?x=1");
    CHECK(echo["auth"] == "Bearer k");
    CHECK(echo["body"] == body);
  }
  CHECK(server.open_connections() == 1); // one connection served all three
  CHECK(client.request("GET", "/models").status == 200);
  server.stop(1s);
}

TEST_CASE("caps: a body over the limit is 413, headers over it 431, garbage 400; the server keeps serving") {
  ServerOptions options;
  options.max_body_bytes = 1000;
  options.max_header_bytes = 2000;
  Server server(options, [](const Request&, const std::shared_ptr<Exchange>& exchange) {
    exchange->respond(200, "text/plain", "ok");
  });
  server.start();
  Client client(local(server));
  const Response big = client.request("POST", "/v1/completions", std::string(5000, 'x'));
  CHECK(big.status == 413);
  CHECK(nlohmann::json::parse(big.body)["error"]["message"].get<std::string>().find("limit of 1000 bytes") !=
        std::string::npos);
  ClientOptions huge_headers;
  huge_headers.headers = {{"X-Big", std::string(5000, 'h')}};
  Client client2(local(server), huge_headers);
  CHECK(client2.request("GET", "/health").status == 431);
  const std::string garbage = raw_exchange(server.port(), "NOT HTTP AT ALL\r\n\r\n");
  CHECK(garbage.rfind("HTTP/1.1 400", 0) == 0);
  const std::string not_ascii = raw_exchange(server.port(), "GET /v1/\xff\xfe HTTP/1.1\r\nHost: a\r\n\r\n");
  CHECK(not_ascii.rfind("HTTP/1.1 400", 0) == 0);
  CHECK(not_ascii.find("not ASCII") != std::string::npos);
  CHECK(client.request("GET", "/health").body == "ok");
}

TEST_CASE("a chunked body's trailers over the header cap are 431, a 70 KiB trailer field or name included") {
  ServerOptions options;
  options.max_header_bytes = 2000;
  Server server(options, [](const Request& request, const std::shared_ptr<Exchange>& exchange) {
    exchange->respond(200, "text/plain", request.body);
  });
  server.start();
  // Connection: close, so the accepted request's connection ends with its answer instead of
  // idling out.
  const std::string head =
      "POST /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n";
  const std::string big(70'000, 'v');
  for (const std::string& trailer : {"X-T: " + big + "\r\n", big + ": v\r\n", std::string("X-T: ok\r\n")}) {
    const std::string answer = raw_exchange(server.port(), head + trailer + "\r\n");
    if (trailer.size() < 100) {
      CHECK(answer.rfind("HTTP/1.1 200", 0) == 0);
      CHECK(answer.ends_with("hello"));
    } else {
      CHECK(answer.rfind("HTTP/1.1 431", 0) == 0);
      CHECK(answer.find("headers or trailers") != std::string::npos);
    }
  }
  CHECK_THROWS_WITH_AS(Server({.max_header_bytes = 1 << 20}, {}), doctest::Contains("max_header_bytes"), InputError);
}

// A client that ends its sending side cannot be told from one that went away: the request in flight
// when the end arrives is cancelled (as vLLM cancels a disconnected client's), the ones before it
// were answered.
TEST_CASE("pipelined requests in one write are all answered, in order, however they are sized") {
  // Answered from another thread a little later, as the engine answers.
  Server server({}, [](const Request& request, const std::shared_ptr<Exchange>& exchange) {
    std::thread([body = request.body, exchange] {
      std::this_thread::sleep_for(5ms);
      exchange->respond(200, "text/plain", "<" + body.substr(0, 3) + ">");
    }).detach();
  });
  server.start();
  for (const int count : {2, 4, 8})
    for (const std::size_t size : {std::size_t{5}, std::size_t{3000}})
      for (const bool half_close : {false, true}) {
        std::string bytes, expected;
        for (int i = 0; i < count; ++i) {
          const std::string body = std::to_string(100 + i) + std::string(size, 'x');
          bytes += "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: " + std::to_string(body.size()) +
                   (i + 1 == count ? "\r\nConnection: close" : "") + "\r\n\r\n" + body;
          if (!half_close || i + 1 < count)
            expected += "<" + std::to_string(100 + i) + ">";
        }
        const std::string answer = raw_exchange(server.port(), bytes, half_close);
        std::string bodies;
        for (std::size_t at = answer.find("\r\n\r\n"); at != std::string::npos; at = answer.find("\r\n\r\n", at + 4))
          bodies += answer.substr(at + 4, 5);
        CAPTURE(count);
        CAPTURE(size);
        CAPTURE(half_close);
        CHECK(bodies == expected);
      }
  server.stop(1s);
}

TEST_CASE("a local connection (a socketpair, no TCP) is served like an accepted one, pipelining included") {
  Server server({}, [](const Request& request, const std::shared_ptr<Exchange>& exchange) {
    exchange->respond(200, "text/plain", request.method + " " + request.path() + " " + request.body);
  });
  server.start();
  const std::string two = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
                          "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  const int fd = server.open_local_connection();
  REQUIRE(fd >= 0);
  CHECK(::send(fd, two.data(), two.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(two.size()));
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;)
    answer.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  CHECK(answer.find("HTTP/1.1 200 OK") == 0);
  const auto first = answer.find("POST /a one"), second = answer.find("GET /b ");
  CHECK(first != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(first < second);
  CHECK(eventually([&] { return server.open_connections() == 0; }));
  server.stop(1s);
  CHECK_THROWS_AS(server.open_local_connection(), RuntimeFailure);
}

TEST_CASE("Ctrl-C abandons a blocking request that the server never answers: Interrupted") {
  std::shared_ptr<Exchange> held; // written on the server's thread only
  Server server({}, [&held](const Request&, const std::shared_ptr<Exchange>& exchange) { held = exchange; });
  server.start();
  Client client(local(server));
  std::thread signal([] {
    std::this_thread::sleep_for(50ms);
    request_interrupt(SIGINT);
  });
  CHECK_THROWS_WITH_AS(client.request("GET", "/never"), doctest::Contains("interrupted during a request"), Interrupted);
  signal.join();
  reset_interrupt();
  server.stop(0ms);
}

TEST_CASE("Expect: 100-continue gets its go-ahead, as curl waits for") {
  Server server({}, [](const Request& request, const std::shared_ptr<Exchange>& exchange) {
    exchange->respond(200, "text/plain", request.body);
  });
  server.start();
  const std::string answer = raw_exchange(server.port(), "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: "
                                                         "100-continue\r\nConnection: close\r\n\r\nhello");
  CHECK(answer.rfind("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", 0) == 0);
  CHECK(answer.substr(answer.size() - 5) == "hello");
}

TEST_CASE("a body announced over the cap is refused 413 from its Content-Length, with no 100 Continue first") {
  ServerOptions options;
  options.max_body_bytes = 1000;
  Server server(options, [](const Request&, const std::shared_ptr<Exchange>& exchange) {
    exchange->respond(200, "text/plain", "read");
  });
  server.start();
  // The client waits for the go-ahead and, refused, half-closes without sending the body.
  const std::string answer = raw_exchange(server.port(),
                                          "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\nExpect: "
                                          "100-continue\r\n\r\n",
                                          true);
  CHECK(answer.rfind("HTTP/1.1 413 ", 0) == 0);
  CHECK(answer.find("100 Continue") == std::string::npos);
  CHECK(answer.find("limit of 1000 bytes") != std::string::npos);
}

TEST_CASE("a refused body that is sent anyway is drained (at the body pace) and the client reads the 413") {
  ServerOptions options;
  options.max_body_bytes = 1000;
  Server server(options, [](const Request&, const std::shared_ptr<Exchange>& exchange) {
    exchange->respond(200, "text/plain", "read");
  });
  server.start();
  // No Expect: the client writes all 12 MiB, more than the kernel buffers. Had the server closed instead of draining,
  // the write would fail with a reset (raw_exchange throws) and the 413 would be lost.
  const std::string body(std::size_t{12} << 20, 'x');
  const std::string answer = raw_exchange(
      server.port(),
      "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body, true);
  CHECK(answer.rfind("HTTP/1.1 413 ", 0) == 0);
  CHECK(answer.find("limit of 1000 bytes") != std::string::npos);
  Client client(local(server)); // and the server serves on
  CHECK(client.request("GET", "/health").body == "read");
}

// The one lower bound on time in this file: the pace makes a body take at least its bytes past the
// burst over the pace (a slower machine only takes longer); unpaced, 1.25 MiB on loopback takes
// milliseconds.
TEST_CASE("a body past the burst is read at the server's body pace and arrives intact, chunked or not") {
  ServerOptions options;
  options.max_body_bytes = std::size_t{4} << 20;
  options.body_bytes_per_second = 4.0 * (1 << 20);
  options.body_burst_bytes = std::size_t{256} << 10;
  std::string body(std::size_t{1280} << 10, ' ');
  for (std::size_t i = 0; i < body.size(); ++i)
    body[i] = static_cast<char>('a' + i % 26);
  Server server(options, [&body](const Request& request, const std::shared_ptr<Exchange>& exchange) {
    exchange->respond(200, "text/plain", request.body == body ? "intact" : "damaged");
  });
  server.start();
  // Past the burst, the last read (64 KiB at most) and the header's read: over 0.9 MiB at 4 MiB/s.
  const auto at_least = 0.2s;

  auto started = std::chrono::steady_clock::now();
  Client client(local(server));
  CHECK(client.request("POST", "/x", body).body == "intact");
  CHECK(std::chrono::steady_clock::now() - started >= at_least);

  std::string chunked = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  for (std::size_t at = 0; at < body.size(); at += 8000) {
    const std::string piece = body.substr(at, 8000);
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    chunked += size + piece + "\r\n";
  }
  chunked += "0\r\n\r\n";
  started = std::chrono::steady_clock::now();
  const std::string answer = raw_exchange(server.port(), chunked);
  CHECK(answer.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(answer.ends_with("intact"));
  CHECK(std::chrono::steady_clock::now() - started >= at_least);
}

TEST_CASE("a stream written from another thread arrives as server-sent events, in order, to the end") {
  std::vector<std::thread> workers;
  Server server({}, [&](const Request&, const std::shared_ptr<Exchange>& exchange) {
    exchange->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    workers.emplace_back([exchange, last_with_end = workers.size() % 2 == 1] {
      for (int i = 0; i < 200; ++i)
        exchange->send(format_sse_event(nlohmann::json{{"i", i}}.dump()));
      if (last_with_end) { // the second stream ends with its last piece in one write
        exchange->finish(format_sse_event("[DONE]"));
        return;
      }
      exchange->send(format_sse_event("[DONE]"));
      exchange->finish();
    });
  });
  server.start();
  Client client(local(server));
  for (int round = 0; round < 2; ++round) { // and the connection is reusable after a stream
    std::vector<std::string> data;
    SseParser parser;
    const Response r = client.stream("POST", "/v1/chat/completions", "{}", [&](std::string_view piece) {
      parser.feed(piece, [&](const SseEvent& e) { data.push_back(e.data); });
      return true;
    });
    CHECK(r.status == 200);
    CHECK(r.headers.at("content-type") == "text/event-stream");
    REQUIRE(data.size() == 201);
    for (int i = 0; i < 200; ++i)
      CHECK(nlohmann::json::parse(data[std::size_t(i)])["i"] == i);
    CHECK(data.back() == "[DONE]");
  }
  for (auto& worker : workers)
    worker.join();
  server.stop(1s);
}

TEST_CASE("a client that goes away mid-stream cancels its request at once, and its connection closes") {
  std::atomic<bool> cancelled{false};
  std::thread worker;
  Server server({}, [&](const Request&, const std::shared_ptr<Exchange>& exchange) {
    exchange->on_cancel([&] { cancelled = true; });
    exchange->start_stream(200, "text/event-stream");
    worker = std::thread([exchange] {
      while (exchange->send(format_sse_event("token")))
        std::this_thread::sleep_for(1ms);
    });
  });
  server.start();
  {
    Client client(local(server));
    int pieces = 0;
    client.stream("POST", "/v1/completions", "{}", [&](std::string_view) { return ++pieces < 3; });
  }
  CHECK(eventually([&] { return cancelled.load(); }));
  worker.join(); // send() turned false: the generating thread stopped
  CHECK(eventually([&] { return server.open_connections() == 0; }));
  server.stop(1s);
}

TEST_CASE("a handler that throws answers 500 with the message; a handler's misuse is caught") {
  Server server({}, [](const Request& request, const std::shared_ptr<Exchange>& exchange) {
    if (request.path() == "/twice") {
      exchange->respond(200, "text/plain", "first");
      CHECK_THROWS_AS(exchange->respond(200, "text/plain", "second"), std::logic_error);
      return;
    }
    throw std::runtime_error("engine exploded");
  });
  server.start();
  Client client(local(server));
  const Response r = client.request("GET", "/x");
  CHECK(r.status == 500);
  CHECK(nlohmann::json::parse(r.body)["error"]["message"] == "engine exploded");
  CHECK(client.request("GET", "/twice").body == "first");
}

TEST_CASE("stop: finishes what is in flight within the grace, cancels the rest, closes idle connections") {
  std::mutex mutex;
  std::condition_variable started_cv;
  bool started = false;
  std::shared_ptr<Exchange> endless;
  Server server({}, [&](const Request& request, const std::shared_ptr<Exchange>& exchange) {
    if (request.path() == "/endless") {
      exchange->start_stream(200, "text/event-stream");
      const std::lock_guard lock(mutex);
      endless = exchange;
      started = true;
      started_cv.notify_all();
      return;
    }
    exchange->respond(200, "text/plain", "ok");
  });
  server.start();
  Client idle(local(server));
  CHECK(idle.request("GET", "/a").status == 200); // a kept-alive, idle connection
  std::atomic<bool> stream_ended{false};
  std::thread reader([&] {
    Client client(local(server));
    try {
      client.stream("GET", "/endless", {}, [](std::string_view) { return true; });
    } catch (const RuntimeFailure&) {
    }
    stream_ended = true;
  });
  {
    std::unique_lock lock(mutex);
    REQUIRE(started_cv.wait_for(lock, 20s, [&] { return started; }));
  }
  std::atomic<bool> cancelled{false};
  endless->on_cancel([&] { cancelled = true; });
  const Url url = local(server);
  server.stop(50ms); // the endless stream never finishes: it is cancelled after the grace
  CHECK(cancelled.load());
  CHECK(endless->cancelled());
  CHECK_FALSE(endless->send("late"));
  reader.join();
  CHECK(stream_ended.load());
  CHECK(server.open_connections() == 0);
  CHECK_THROWS_AS(Client(url).request("GET", "/a"), RuntimeFailure); // no longer accepting
}

TEST_CASE("an idle connection is closed after the idle timeout; a busy port is named") {
  ServerOptions options;
  options.idle_timeout = 100ms;
  Server server(options, [](const Request&, const std::shared_ptr<Exchange>& exchange) {
    exchange->respond(200, "text/plain", "ok");
  });
  server.start();
  // Connects and says nothing: the read of the server's answer ends when it closes the socket.
  CHECK(raw_exchange(server.port(), "").empty());
  CHECK(eventually([&] { return server.open_connections() == 0; }));
  ServerOptions same;
  same.port = server.port();
  const std::string expected = "cannot listen on 127.0.0.1:" + std::to_string(server.port());
  CHECK_THROWS_WITH_AS(Server(same, [](const Request&, const std::shared_ptr<Exchange>&) {}),
                       doctest::Contains(expected.c_str()), RuntimeFailure);
}

TEST_CASE("out of file descriptors, accepting pauses instead of spinning, and serving resumes") {
  Server server({}, [](const Request&, const std::shared_ptr<Exchange>& exchange) {
    exchange->respond(200, "text/plain", "ok");
  });
  server.start();
  // Lower the process's descriptor limit to what is open, then take every free number below it
  // (close-on-exec, so the client below starts with room).
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  int highest = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    highest = std::max(highest, std::stoi(entry.path().filename().string()));
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(highest + 1);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> fillers;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;)
    fillers.push_back(fd);
  const int open_errno = errno;
  // Another process connects: the connection waits in the backlog while accept() has no
  // descriptor. A forked child (no shell: dash saves descriptors above 10 when it redirects, which
  // a limit this low refuses) makes only async-signal-safe calls: it lifts its own limit back,
  // connects and holds the connection until it is killed.
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(server.port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const pid_t child = ::fork();
  if (child == 0) {
    ::setrlimit(RLIMIT_NOFILE, &saved);
    const int socket_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (socket_fd < 0 || ::connect(socket_fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
      ::_exit(1);
    for (;;)
      ::pause();
  }
  const bool failed = eventually([&] { return server.accept_failures() > 0; }, 10s);
  const std::uint64_t before = server.accept_failures();
  std::this_thread::sleep_for(500ms);
  const std::uint64_t during = server.accept_failures() - before;
  for (const int fd : fillers)
    ::close(fd);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  CHECK(open_errno == EMFILE);
  REQUIRE(child > 0);
  CHECK(failed);
  // A retry every 50 ms makes about ten in half a second (fewer on a busy machine); accepting
  // again at once made hundreds of thousands.
  CHECK(during <= 50);
  // With descriptors back, the waiting connection is accepted and requests are served.
  CHECK(eventually([&] { return server.open_connections() > 0; }));
  const auto response = raw_exchange(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(response.find("200") != std::string::npos);
  ::kill(child, SIGKILL);
  int child_status = 0;
  CHECK(::waitpid(child, &child_status, 0) == child);
  CHECK(WIFSIGNALED(child_status)); // it connected and was waiting, not exited for a failed connect
}

TEST_CASE("with a bulk lane, a large body's slow handler does not hold up small requests; a throw is still a 500") {
  ServerOptions options;
  options.bulk_body_bytes = 1024;
  std::mutex mutex;
  std::condition_variable wake;
  bool small_answered = false;
  std::atomic<bool> large_started{false};
  Server server(options, [&](const Request& request, const std::shared_ptr<Exchange>& exchange) {
    if (request.path() == "/throw")
      throw std::runtime_error("parser exploded");
    if (request.body.size() < 1024)
      return exchange->respond(200, "text/plain", "small");
    large_started = true;
    // A huge body's parse: it ends only once the small request has been answered meanwhile
    // (handled on the I/O thread, this would wait out its deadline instead).
    std::unique_lock lock(mutex);
    const bool overtaken = wake.wait_for(lock, 30s, [&] { return small_answered; });
    exchange->respond(200, "text/plain", overtaken ? "overtaken" : "blocked the small request");
  });
  server.start();
  std::thread large([&] {
    Client client(local(server));
    CHECK(client.request("POST", "/large", std::string(4096, 'x')).body == "overtaken");
  });
  REQUIRE(eventually([&] { return large_started.load(); }));
  Client client(local(server));
  CHECK(client.request("POST", "/small", "tiny").body == "small");
  {
    const std::lock_guard lock(mutex);
    small_answered = true;
  }
  wake.notify_all();
  large.join();
  const Response thrown = client.request("POST", "/throw", std::string(2048, 'x'));
  CHECK(thrown.status == 500);
  CHECK(nlohmann::json::parse(thrown.body)["error"]["message"] == "parser exploded");
}

TEST_CASE("past max_bulk_waiting large requests, the next one is a 503 with Retry-After; the server keeps serving") {
  ServerOptions options;
  options.bulk_body_bytes = 1024;
  options.max_bulk_waiting = 1;
  std::mutex mutex;
  std::condition_variable wake;
  bool release = false;
  std::atomic<int> started{0};
  Server server(options, [&](const Request&, const std::shared_ptr<Exchange>& exchange) {
    ++started;
    std::unique_lock lock(mutex);
    wake.wait_for(lock, 30s, [&] { return release; });
    exchange->respond(200, "text/plain", "done");
  });
  server.start();
  const std::string body(4096, 'x');
  std::array<std::atomic<int>, 3> statuses{};
  std::array<std::string, 3> retry_after;
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] {
      Client client(local(server));
      const Response r = client.request("POST", "/large", body);
      statuses[i] = r.status;
      retry_after[i] = r.headers.count("retry-after") ? r.headers.at("retry-after") : "";
    });
    if (i == 0) // the first is running; of the next two, one waits and the other is refused
      REQUIRE(eventually([&] { return started.load() == 1; }));
  }
  // The refused one answers at once, while the lane is still blocked.
  REQUIRE(eventually([&] { return statuses[1] == 503 || statuses[2] == 503; }));
  {
    const std::lock_guard lock(mutex);
    release = true;
  }
  wake.notify_all();
  for (auto& c : clients)
    c.join();
  CHECK(statuses[0] == 200);
  CHECK(((statuses[1] == 200 && statuses[2] == 503) || (statuses[1] == 503 && statuses[2] == 200)));
  CHECK(retry_after[statuses[1] == 503 ? 1 : 2] == "1");
  Client client(local(server));
  CHECK(client.request("POST", "/large", body).status == 200);
}
