#include "proc/child_process.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <fmt/format.h>

#include <fstream>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <string.h>
#include <string_view>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace optkit::proc {

namespace bp = boost::process;

struct ChildProcess::Impl {
  bp::child child;
};

std::string
describe(const ExitStatus& status) {
  if (status.signal) {
    return signal_name(*status.signal);
  }
  return fmt::format("exit {}", status.exit_code.value_or(-1));
}

namespace {

ExitStatus
decode(int raw) {
  ExitStatus status;
  if (WIFSIGNALED(raw)) {
    status.signal = WTERMSIG(raw);
  } else {
    status.exit_code = WEXITSTATUS(raw);
  }
  return status;
}

} // namespace

namespace {

// This process's environment with `extra` added or replacing entries of the same name. Built by
// hand: Boost 1.74's environment lookup reads past shorter entries (an ASan heap over-read).
std::vector<std::string>
child_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> entries;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const auto name = entry.substr(0, entry.find('='));
    if (!extra.contains(std::string(name))) {
      entries.emplace_back(entry);
    }
  }
  for (const auto& [name, value] : extra) {
    entries.push_back(name + "=" + value);
  }
  return entries;
}

} // namespace

std::optional<std::filesystem::path>
find_on_path(const std::string& program) {
  if (program.find('/') != std::string::npos)
    return program;
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const auto end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / program;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  return std::nullopt;
}

std::string
log_tail(const std::filesystem::path& file, std::size_t lines) {
  std::ifstream in(file);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);)
    all.push_back(line);
  const std::size_t from = all.size() > lines ? all.size() - lines : 0;
  return join(std::vector<std::string>(all.begin() + static_cast<std::ptrdiff_t>(from), all.end()), " | ");
}

template <class... Redirects>
void
ChildProcess::start(const std::filesystem::path& executable, const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& extra_env, Redirects&&... redirects) {
  std::vector<std::string> env = child_environment(extra_env);
  std::vector<char*> envp;
  for (auto& entry : env) {
    envp.push_back(entry.data());
  }
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  try {
    m_impl = std::make_unique<Impl>(Impl{bp::child(
        bp::exe = executable.string(), bp::args = args, std::forward<Redirects>(redirects)..., bp::std_in < bp::null,
        bp::extend::on_setup = [&envp](auto& exec) { exec.env = envp.data(); },
        bp::extend::on_exec_setup =
            [parent](auto&) {
              // In the child, between fork and exec: only async-signal-safe calls.
              ::setpgid(0, 0);
              ::prctl(PR_SET_PDEATHSIG, SIGKILL);
              if (::getppid() != parent) {
                ::_exit(127); // the parent died before PDEATHSIG was armed
              }
            })});
  } catch (const bp::process_error& e) {
    throw RuntimeFailure(fmt::format("cannot start {}: {}", executable.string(), e.what()));
  }
  m_pid = m_impl->child.id();
  // Also set the group from the parent side, so signal_group works even before the child ran.
  ::setpgid(m_pid, m_pid);
}

ChildProcess::ChildProcess(const std::filesystem::path& executable, const std::vector<std::string>& args,
                           const std::filesystem::path& log_file, const std::map<std::string, std::string>& extra_env) {
  start(executable, args, extra_env, (bp::std_out & bp::std_err) > log_file.string());
}

ChildProcess::ChildProcess(const std::filesystem::path& executable, const std::vector<std::string>& args,
                           const std::filesystem::path& stdout_file, const std::filesystem::path& log_file,
                           const std::map<std::string, std::string>& extra_env) {
  start(executable, args, extra_env, bp::std_out > stdout_file.string(), bp::std_err > log_file.string());
}

ChildProcess::~ChildProcess() {
  if (m_impl && !m_status) {
    signal_group(SIGKILL);
    wait();
  }
  if (m_impl) {
    m_impl->child.detach(); // reaped already; keep Boost from signalling a recycled pid
  }
}

std::optional<ExitStatus>
ChildProcess::poll() {
  if (m_status) {
    return m_status;
  }
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) {
    return std::nullopt; // running (or not ours to wait for)
  }
  return sweep_and_reap();
}

ExitStatus
ChildProcess::wait() {
  if (m_status) {
    return *m_status;
  }
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  return sweep_and_reap();
}

ExitStatus
ChildProcess::sweep_and_reap() {
  ::kill(-m_pid, SIGKILL); // the unreaped leader still holds the group's id
  std::error_code ec;
  m_impl->child.wait(ec);
  m_status = decode(m_impl->child.native_exit_code());
  return *m_status;
}

void
ChildProcess::signal_group(int signal) const {
  if (m_pid > 0 && !m_status) {
    ::kill(-m_pid, signal);
  }
}

} // namespace optkit::proc
