// Behaviours for the hidden `optkit internal-test` command, which exists so the tests can drive
// real child processes through the worker pool: echo, sleep, hang (ignoring SIGTERM), crash,
// exit with a code, spawn a process tree, fail until a given attempt, meet other children
// (rendezvous), and hammer the archive. A payload's "ready_file" is created once a hang or
// spawn-tree child is set up, so a test can wait for that instead of sleeping.
#pragma once

#include "proc/worker_pool.hpp"

#include <filesystem>
#include <vector>

namespace optkit::selftest {

// Child side: performs spec.payload["task"] and returns the result to write back.
nlohmann::json run_test_task(const proc::WorkerSpec& spec);

// Parent side: reads a JSON array of tasks, each
// {"payload": {...}, "timeout_s", "grace_s", "max_attempts", "retry_on_signal",
//  "retry_on_timeout", "retry_exit_codes", "backoff_s"} (all but payload optional).
std::vector<proc::WorkerTask> read_test_tasks(const std::filesystem::path& file);

} // namespace optkit::selftest
