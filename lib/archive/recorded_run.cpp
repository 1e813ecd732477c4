#include "archive/recorded_run.hpp"

#include "core/log.hpp"

#include <filesystem>

namespace optkit::archive {

RunStatus
status_for(ExitCode code) {
  switch (code) {
  case ExitCode::ok:
    return RunStatus::succeeded;
  case ExitCode::goal_not_met:
    return RunStatus::goal_not_met;
  case ExitCode::interrupted:
    return RunStatus::interrupted;
  case ExitCode::bad_input:
  case ExitCode::runtime:
    return RunStatus::failed;
  }
  return RunStatus::failed;
}

void
record_run(RunArchive& archive, const NewRun& run, const std::function<void(std::int64_t run_id)>& body) {
  const std::int64_t run_id = archive.begin_run(run);
  const auto finish = [&](ExitCode code, const std::string& message) {
    try {
      archive.finish_run(run_id, status_for(code), static_cast<int>(code), message);
    } catch (const Error& e) {
      // The original failure matters more than the bookkeeping one; say both.
      log::error("could not record the end of run {}: {}", run_id, e.what());
    }
  };
  try {
    body(run_id);
  } catch (const Error& e) {
    finish(e.code(), e.what());
    throw;
  } catch (const std::exception& e) {
    finish(ExitCode::runtime, e.what());
    throw;
  }
  finish(ExitCode::ok, "");
}

std::size_t
remove_run_with_files(RunArchive& archive, std::int64_t run_id) {
  const auto run_dir = archive.run_directory(run_id);
  archive.remove_run(run_id);
  std::error_code ec;
  const auto removed = std::filesystem::remove_all(run_dir, ec);
  return ec || removed == static_cast<std::uintmax_t>(-1) ? 0 : static_cast<std::size_t>(removed);
}

} // namespace optkit::archive
