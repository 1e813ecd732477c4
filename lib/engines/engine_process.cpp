#include "engines/engine_process.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "engines/effective_settings.hpp"
#include "http/client.hpp"

#include <boost/asio.hpp>
#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace optkit::engines {

namespace {

std::filesystem::path
find_on_path(const std::string& program) {
  if (auto found = proc::find_on_path(program))
    return *found;
  throw InputError(fmt::format("engine executable '{}' is not on PATH; install the engine or give "
                               "--engine-executable PATH",
                               program));
}

std::string
log_tail(const std::filesystem::path& file, std::size_t lines) {
  std::ifstream in(file);
  std::vector<std::string> all;
  std::string line;
  while (std::getline(in, line))
    all.push_back(line);
  std::string tail;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    tail += "\n  " + all[i];
  return tail;
}

} // namespace

int
free_loopback_port() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acceptor(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

EngineProcess::EngineProcess(LaunchOptions options) : m_options(std::move(options)) {
  auto& s = m_options.settings;
  if (s.port == 0)
    s.port = free_loopback_port();
  if (s.host.empty())
    s.host = "127.0.0.1";
  std::filesystem::create_directories(m_options.directory);
  const auto options_file = m_options.directory / "extra-llm-api-options.yaml";
  const auto command = command_line(m_options.kind, s, options_file.string());
  if (!command.extra_options_yaml.empty())
    write_file_atomic(options_file, command.extra_options_yaml);
  auto argv = command.argv();
  const auto executable = find_on_path(m_options.executable.empty() ? argv.front() : m_options.executable);
  argv.erase(argv.begin());
  m_log = m_options.directory / (to_string(m_options.kind) + ".log");
  m_record = {
      {"engine", to_string(m_options.kind)}, {"executable", executable.string()}, {"argv", argv}, {"port", s.port}};
  m_child = std::make_unique<proc::ChildProcess>(executable, argv, m_log, m_options.environment);
  if (!m_options.environment.empty())
    m_record["environment"] = m_options.environment;
  try {
    wait_ready(m_options.ready_timeout_s);
  } catch (...) {
    m_child.reset(); // kills the group
    throw;
  }
}

EngineProcess::~EngineProcess() {
  if (!m_child)
    return;
  m_child->signal_group(SIGTERM);
  for (int i = 0; i < 100 && !m_child->poll(); ++i) // up to 10 s to shut down cleanly
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  m_child.reset(); // SIGKILL whatever is left, and reap
}

std::string
EngineProcess::url() const {
  return fmt::format("http://127.0.0.1:{}", m_options.settings.port);
}

void
EngineProcess::wait_ready(double timeout_s) {
  http::ClientOptions client_options;
  client_options.connect_timeout = std::chrono::milliseconds(1000);
  client_options.request_timeout = std::chrono::milliseconds(5000);
  http::Client client(http::parse_url(url()), client_options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    throw_if_interrupted();
    if (const auto status = m_child->poll()) {
      const std::string message =
          fmt::format("engine {} exited ({}) before it was ready; the end of its log ({}):{}",
                      to_string(m_options.kind), proc::describe(*status), m_log.string(), log_tail(m_log, 12));
      // optkit's own server exits 2 for input it refuses (a corrupt model folder): the same input
      // error, and exit code, as compress and eval perplexity give for it.
      if (m_options.kind == EngineKind::optkit && status->exit_code == static_cast<int>(ExitCode::bad_input))
        throw InputError(message);
      throw RuntimeFailure(message);
    }
    try {
      if (client.request("GET", "/health").status == 200)
        break;
    } catch (const RuntimeFailure&) {
      // not listening yet
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw RuntimeFailure(fmt::format("engine {} did not answer /health within {:.0f} s; the end of its log ({}):{}",
                                       to_string(m_options.kind), timeout_s, m_log.string(), log_tail(m_log, 12)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Version and served models, read back rather than assumed.
  try {
    if (m_options.kind == EngineKind::llamacpp) { // no /version: its build and settings are in /props
      const auto props = client.request("GET", "/props");
      const auto body = nlohmann::json::parse(props.body, nullptr, false);
      if (auto version = llamacpp_version(body); props.status == 200 && !version.is_null())
        m_record["version"] = std::move(version);
      if (auto effective = effective_from_props(body); props.status == 200 && !effective.is_null())
        m_record["effective"] = std::move(effective);
    }
    const auto version = client.request("GET", "/version");
    const auto body = nlohmann::json::parse(version.body, nullptr, false);
    if (version.status == 200 && body.is_object() && body.contains("version"))
      m_record["version"] = body["version"];
    // Effective settings: serve-deltas reports them with its version, vLLM as /metrics info gauges.
    if (auto effective = effective_from_version(body); !effective.is_null()) {
      m_record["effective"] = std::move(effective);
    } else if (const auto metrics = client.request("GET", "/metrics"); metrics.status == 200) {
      if (auto info = config_info_labels(metrics.body); !info.empty())
        m_record["effective"] = std::move(info);
    }
    const auto models = client.request("GET", "/v1/models");
    const auto listed = nlohmann::json::parse(models.body, nullptr, false);
    if (models.status == 200 && listed.is_object() && listed.contains("data"))
      m_record["models"] = listed["data"];
  } catch (const RuntimeFailure&) {
  }
}

} // namespace optkit::engines
