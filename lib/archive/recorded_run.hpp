// One command invocation recorded as a run: the row is written (status running) before the work
// starts, and finished with the status its outcome maps to — including failures and Ctrl-C —
// so the archive records every run, not only the successful ones.
#pragma once

#include "archive/run_archive.hpp"
#include "core/error.hpp"

#include <functional>

namespace optkit::archive {

RunStatus status_for(ExitCode code);

// Runs body(run_id) inside a recorded run. The body's exception, if any, is recorded (status,
// exit code, message) and rethrown unchanged.
void record_run(RunArchive& archive, const NewRun& run, const std::function<void(std::int64_t run_id)>& body);

// Deletes the run's rows and the files optkit itself wrote for it (worker specs, results, logs
// under the archive's run directory); files elsewhere (models, user outputs) are never touched.
// Returns how many files were removed.
std::size_t remove_run_with_files(RunArchive& archive, std::int64_t run_id);

} // namespace optkit::archive
