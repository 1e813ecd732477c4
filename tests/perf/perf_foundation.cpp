// Benchmarks for the foundation, each against a baseline run side by side in the same process:
//  1. archive writes: one trial + 3 metrics per transaction through RunArchive, against the same
//     rows through the raw SQLite C API with the same pragmas (WAL, synchronous=NORMAL);
//  2. worker round trip: a WorkerPool task (spec file, child process, log, archive rows, result),
//     against spawning the same binary with posix_spawn and waiting for it.
// Prints figures; asserts nothing (timings are for reading, not for CI).
#include "archive/run_archive.hpp"
#include "proc/worker_pool.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace optkit;

namespace {

double
now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double
archive_writes_per_second(const std::filesystem::path& db, int trials) {
  archive::RunArchive archive(db);
  const auto run = archive.begin_run({"perf", nlohmann::json::array(), nlohmann::json::object()});
  const double start = now();
  for (int i = 0; i < trials; ++i) {
    archive.transaction([&] {
      const auto trial = archive.begin_trial(run, i, 1, {{"i", i}});
      for (int m = 0; m < 3; ++m) {
        archive.add_metric(run, trial, {fmt::format("metric_{}", m), i * 0.5, "unit", i});
      }
      archive.finish_trial(trial, {archive::TrialStatus::succeeded, 0, std::nullopt, {{"i", i}}, ""});
    });
  }
  return trials / (now() - start);
}

void
check(int rc, sqlite3* db) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    throw std::runtime_error(sqlite3_errmsg(db));
  }
}

double
raw_sqlite_writes_per_second(const std::filesystem::path& db_path, int trials) {
  { archive::RunArchive create(db_path); } // same schema
  sqlite3* db = nullptr;
  check(sqlite3_open(db_path.c_str(), &db), db);
  check(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", nullptr, nullptr,
                     nullptr),
        db);
  check(sqlite3_exec(db,
                     "INSERT INTO runs (command, argv, config, version, git_commit, host, pid, cwd, status, "
                     "started_at) VALUES ('perf', '[]', '{}', '', '', '', 0, '', 'running', 0)",
                     nullptr, nullptr, nullptr),
        db);
  const sqlite3_int64 run = sqlite3_last_insert_rowid(db);
  sqlite3_stmt *trial_insert, *metric_insert, *trial_update;
  sqlite3_prepare_v2(db,
                     "INSERT INTO trials (run_id, trial_index, attempt, params, status, started_at) "
                     "VALUES (?, ?, 1, ?, 'running', 0)",
                     -1, &trial_insert, nullptr);
  sqlite3_prepare_v2(db,
                     "INSERT INTO metrics (run_id, trial_id, name, value, unit, step, recorded_at) "
                     "VALUES (?, ?, ?, ?, 'unit', ?, 0)",
                     -1, &metric_insert, nullptr);
  sqlite3_prepare_v2(db, "UPDATE trials SET status='succeeded', exit_code=0, result=?, ended_at=0 WHERE id=?", -1,
                     &trial_update, nullptr);
  const double start = now();
  for (int i = 0; i < trials; ++i) {
    check(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), db);
    const std::string params = fmt::format("{{\"i\":{}}}", i);
    sqlite3_bind_int64(trial_insert, 1, run);
    sqlite3_bind_int(trial_insert, 2, i);
    sqlite3_bind_text(trial_insert, 3, params.c_str(), -1, SQLITE_TRANSIENT);
    check(sqlite3_step(trial_insert), db);
    sqlite3_reset(trial_insert);
    const sqlite3_int64 trial = sqlite3_last_insert_rowid(db);
    for (int m = 0; m < 3; ++m) {
      const std::string name = fmt::format("metric_{}", m);
      sqlite3_bind_int64(metric_insert, 1, run);
      sqlite3_bind_int64(metric_insert, 2, trial);
      sqlite3_bind_text(metric_insert, 3, name.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_double(metric_insert, 4, i * 0.5);
      sqlite3_bind_int(metric_insert, 5, i);
      check(sqlite3_step(metric_insert), db);
      sqlite3_reset(metric_insert);
    }
    sqlite3_bind_text(trial_update, 1, params.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(trial_update, 2, trial);
    check(sqlite3_step(trial_update), db);
    sqlite3_reset(trial_update);
    check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db);
  }
  const double rate = trials / (now() - start);
  sqlite3_finalize(trial_insert);
  sqlite3_finalize(metric_insert);
  sqlite3_finalize(trial_update);
  sqlite3_close(db);
  return rate;
}

double
pool_round_trip_seconds(const std::filesystem::path& dir, const std::filesystem::path& exe, int tasks) {
  archive::RunArchive archive(dir / "pool.db");
  proc::PoolOptions options;
  options.executable = exe;
  options.global_args = {"--archive", (dir / "pool.db").string(), "-q"};
  options.recorder = &archive;
  options.run_id = archive.begin_run({"perf", nlohmann::json::array(), nlohmann::json::object()});
  options.work_dir = dir / "work";
  options.show_progress = false;
  options.poll_interval_s = 0.001;
  proc::WorkerTask task;
  task.command = {"internal-test"};
  task.payload = {{"task", "echo"}};
  const std::vector<proc::WorkerTask> all(static_cast<std::size_t>(tasks), task);
  const double start = now();
  proc::WorkerPool(options).run(all);
  return (now() - start) / tasks;
}

double
plain_spawn_seconds(const std::filesystem::path& exe, int count) {
  const double start = now();
  for (int i = 0; i < count; ++i) {
    const std::string path = exe.string();
    char arg0[] = "optkit";
    char arg1[] = "--version";
    char* argv[] = {arg0, arg1, nullptr};
    pid_t pid = 0;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    int status = 0;
    waitpid(pid, &status, 0);
  }
  return (now() - start) / count;
}

} // namespace

int
main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 5000;
  const int spawns = argc > 2 ? std::atoi(argv[2]) : 50;
  std::string pattern = (std::filesystem::temp_directory_path() / "optkit-perf-XXXXXX").string();
  const std::filesystem::path dir = ::mkdtemp(pattern.data());
  const std::filesystem::path exe = OPTKIT_PERF_BINARY;

  const double ours = archive_writes_per_second(dir / "ours.db", trials);
  const double raw = raw_sqlite_writes_per_second(dir / "raw.db", trials);
  fmt::print("archive writes ({} trials, 1 trial + 3 metrics + 1 update per transaction)\n", trials);
  fmt::print("  RunArchive       {:9.0f} trials/s\n", ours);
  fmt::print("  raw SQLite C API {:9.0f} trials/s   (baseline)\n", raw);
  fmt::print("  ratio            {:9.2f} (RunArchive / baseline)\n", ours / raw);

  const double pool = pool_round_trip_seconds(dir, exe, spawns);
  const double plain = plain_spawn_seconds(exe, spawns);
  fmt::print("worker round trip ({} tasks, 1 slot)\n", spawns);
  fmt::print("  WorkerPool task  {:9.2f} ms   (spec, child, log, archive rows, result)\n", pool * 1e3);
  fmt::print("  posix_spawn+wait {:9.2f} ms   (baseline: the same binary, --version)\n", plain * 1e3);
  fmt::print("  ratio            {:9.2f} (WorkerPool / baseline)\n", pool / plain);
  std::filesystem::remove_all(dir);
  return 0;
}
