// A serving engine started as a child process group from its adapter's command line: its log
// captured to a file, ready once GET /health answers 200 (a timeout, or the child exiting first,
// is a RuntimeFailure quoting the log's last lines), its version and effective settings read
// back, and the whole group stopped (SIGTERM, then SIGKILL) when the object goes — at the end,
// on failure and on Ctrl-C.
#pragma once

#include "engines/engine_adapter.hpp"
#include "proc/child_process.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

namespace optkit::engines {

struct LaunchOptions {
  EngineKind kind = EngineKind::vllm;
  EngineSettings settings;         // port 0: a free loopback port
  std::string executable;          // replaces the command's program (empty: found on PATH)
  std::filesystem::path directory; // for the log and TensorRT-LLM's options file
  double ready_timeout_s = 900;
  std::map<std::string, std::string> environment; // added to the engine's (e.g. CUDA_VISIBLE_DEVICES)
};

class EngineProcess {
public:
  explicit EngineProcess(LaunchOptions options);
  ~EngineProcess();
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;

  std::string url() const; // http://127.0.0.1:PORT
  const std::filesystem::path& log_file() const { return m_log; }
  // What was launched and what the engine reports: argv, version (GET /version when it answers),
  // its effective settings ("effective": see effective_settings.hpp) when it reports them, the
  // models it serves with their max_model_len when listed.
  const nlohmann::json& record() const { return m_record; }

private:
  void wait_ready(double timeout_s);

  LaunchOptions m_options;
  std::filesystem::path m_log;
  std::unique_ptr<proc::ChildProcess> m_child;
  nlohmann::json m_record;
};

// A TCP port on 127.0.0.1 free at the time of the call.
int free_loopback_port();

} // namespace optkit::engines
