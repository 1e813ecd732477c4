#include "proc/child_process.hpp"

#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <fstream>
#include <string>

using namespace optkit;
using namespace optkit::proc;

namespace {

// A shell that leaves `sleep 300` running in its group, writes its pid to `pid_file`, and exits 3.
ChildProcess
leave_grandchild(const test::ScratchDir& dir, const std::filesystem::path& pid_file) {
  return ChildProcess("/bin/sh", {"-c", "sleep 300 & echo $! > '" + pid_file.string() + "'; exit 3"}, dir / "log");
}

pid_t
read_pid(const std::filesystem::path& file) {
  std::ifstream in(file);
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

} // namespace

TEST_CASE("a child that exits leaves nothing running in its group: poll() kills it before the exit is reported") {
  test::ScratchDir dir;
  ChildProcess child = leave_grandchild(dir, dir / "pid");
  std::optional<ExitStatus> exit;
  REQUIRE(test::wait_until([&] { return (exit = child.poll()).has_value(); }, 60.0));
  CHECK(exit->exit_code == 3);
  const pid_t grandchild = read_pid(dir / "pid");
  REQUIRE(grandchild > 0);
  // SIGKILL went to the group before poll() returned; the orphan is reaped by init in its own time.
  CHECK(test::wait_until([&] { return test::process_gone(grandchild); }, 60.0));
  child.signal_group(SIGTERM); // the child is reaped: its group is not signalled again
  CHECK(child.poll()->exit_code == 3);
}

TEST_CASE("wait() kills what the child left in its group, as poll() does") {
  test::ScratchDir dir;
  ChildProcess child = leave_grandchild(dir, dir / "pid");
  CHECK(child.wait().exit_code == 3);
  const pid_t grandchild = read_pid(dir / "pid");
  REQUIRE(grandchild > 0);
  CHECK(test::wait_until([&] { return test::process_gone(grandchild); }, 60.0));
}
