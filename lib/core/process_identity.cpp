#include "core/process_identity.hpp"

#include <cerrno>
#include <csignal>
#include <unistd.h>

namespace optkit {

std::string
host_name() {
  char buffer[256] = {};
  return ::gethostname(buffer, sizeof buffer - 1) == 0 ? std::string(buffer) : std::string("unknown");
}

bool
process_is_gone(std::int64_t pid) {
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

} // namespace optkit
