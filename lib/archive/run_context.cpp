#include "archive/run_context.hpp"

namespace optkit::archive {

proc::PoolOptions
pool_options(const RunContext& context, std::string label) {
  proc::PoolOptions pool;
  pool.executable = context.executable;
  pool.global_args = context.global_args;
  pool.recorder = context.archive;
  pool.run_id = context.run_id;
  pool.work_dir = context.archive->run_directory(context.run_id);
  pool.show_progress = context.show_progress;
  pool.progress_label = std::move(label);
  return pool;
}

} // namespace optkit::archive
