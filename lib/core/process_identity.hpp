// Which process, on which host: what a run row or a staging folder records so that a later
// process can tell whether its writer still lives (`kill -9` leaves rows and folders behind).
#pragma once

#include <cstdint>
#include <string>

namespace optkit {

// gethostname(), or "unknown".
std::string host_name();

// True only when `pid` names no process on this host (kill(pid, 0) fails with ESRCH). A pid of
// another host says nothing here, so callers compare hosts first.
bool process_is_gone(std::int64_t pid);

} // namespace optkit
