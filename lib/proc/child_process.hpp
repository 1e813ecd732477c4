// One child process in its own process group, its stdout and stderr captured together in a log
// file. Signals go to the whole group so grandchildren cannot outlive a timeout or Ctrl-C, and the
// child is killed if this process dies (PR_SET_PDEATHSIG). When the child exits, whatever it left
// in its group is killed before the child is reaped: until then its pid, the group's id, cannot be
// given to another process, so the signal cannot reach another process's group. After that the
// group is never signalled again.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace optkit::proc {

struct ExitStatus {
  std::optional<int> exit_code; // set when the child exited
  std::optional<int> signal;    // set when a signal killed it
};

// `program` itself when it holds a '/', else the first executable file of that name on $PATH.
std::optional<std::filesystem::path> find_on_path(const std::string& program);

// "exit 3", "SIGSEGV".
std::string describe(const ExitStatus& status);

// The last `lines` lines of a child's log joined by " | " (why it failed, in one error line).
std::string log_tail(const std::filesystem::path& file, std::size_t lines);

class ChildProcess {
public:
  // Starts `executable args...` with `extra_env` added to this process's environment. Throws
  // RuntimeFailure naming the executable when it cannot be started.
  ChildProcess(const std::filesystem::path& executable, const std::vector<std::string>& args,
               const std::filesystem::path& log_file, const std::map<std::string, std::string>& extra_env = {});
  // As above, with stdout written to its own file (a result a parent parses) and stderr to the log.
  ChildProcess(const std::filesystem::path& executable, const std::vector<std::string>& args,
               const std::filesystem::path& stdout_file, const std::filesystem::path& log_file,
               const std::map<std::string, std::string>& extra_env);
  // A child still running is killed (with its group) and reaped.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return m_pid; }
  // Non-blocking: the exit status once the child has exited (its group killed, the child
  // reaped), nullopt while it runs.
  std::optional<ExitStatus> poll();
  // Blocks until the child exits; then as poll().
  ExitStatus wait();
  // Sends `signal` to every process in the child's group while the child is unreaped; a group
  // already gone is not an error.
  void signal_group(int signal) const;

private:
  template <class... Redirects>
  void start(const std::filesystem::path& executable, const std::vector<std::string>& args,
             const std::map<std::string, std::string>& extra_env, Redirects&&... redirects);

  // The child has exited: kills what is left in its group, then reaps it.
  ExitStatus sweep_and_reap();

  struct Impl;
  std::unique_ptr<Impl> m_impl;
  pid_t m_pid = -1;
  std::optional<ExitStatus> m_status;
};

} // namespace optkit::proc
