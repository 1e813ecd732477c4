// What the parent side of a recorded command needs to record its run and run its work in worker
// children: the archive and run, the executable and global flags the children get, their timeout.
#pragma once

#include "archive/run_archive.hpp"
#include "proc/worker_pool.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace optkit::archive {

struct RunContext {
  std::filesystem::path executable;     // optkit itself
  std::vector<std::string> global_args; // --archive, -v ... for the children
  RunArchive* archive = nullptr;
  std::int64_t run_id = 0;
  double timeout_s = 0; // per child attempt, 0 = none
  bool show_progress = true;

  // Whether this run is recorded: an archive and a run in it (tests and nested studies pass none).
  bool recording() const { return archive != nullptr && run_id != 0; }
};

// Pool options for a recorded command's children: its executable, global flags, archive, run
// and per-run log folder; `label` names the progress line.
proc::PoolOptions pool_options(const RunContext& context, std::string label);

} // namespace optkit::archive
