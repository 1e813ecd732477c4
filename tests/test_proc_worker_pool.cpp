#include "proc/worker_pool.hpp"

#include "archive/run_archive.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "support/gated_clock.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <functional>

using namespace optkit;
using namespace optkit::proc;

namespace {

struct PoolFixture {
  test::ScratchDir dir;
  archive::RunArchive archive{dir / "a.db"};
  std::int64_t run_id = archive.begin_run({"pool-test", nlohmann::json::array(), nlohmann::json::object()});

  PoolOptions options(int slots = 2) {
    PoolOptions o;
    o.executable = test::optkit_binary();
    o.global_args = {"--archive", (dir / "a.db").string(), "--no-color"};
    o.slots = slots;
    o.recorder = &archive;
    o.run_id = run_id;
    o.work_dir = dir / "work";
    o.show_progress = false;
    return o;
  }
};

WorkerTask
task(nlohmann::json payload) {
  WorkerTask t;
  t.command = {"internal-test"};
  t.payload = std::move(payload);
  t.grace_s = 1;
  t.retry.backoff_initial_s = 0.05;
  return t;
}

// True once every file exists.
std::function<bool()>
all_exist(std::vector<std::filesystem::path> files) {
  return [files = std::move(files)] {
    return std::all_of(files.begin(), files.end(), [](const auto& f) { return std::filesystem::exists(f); });
  };
}

} // namespace

TEST_CASE_FIXTURE(PoolFixture, "workers run in parallel and return their results in task order") {
  std::vector<WorkerTask> tasks;
  for (int i = 0; i < 4; ++i) {
    tasks.push_back(task({{"task", "echo"}, {"value", i}}));
  }
  const auto outcomes = WorkerPool(options(4)).run(tasks);
  REQUIRE(outcomes.size() == 4);
  for (int i = 0; i < 4; ++i) {
    const auto& o = outcomes[static_cast<std::size_t>(i)];
    CHECK(o.succeeded());
    CHECK(o.attempts == 1);
    CHECK(o.result["value"] == i);
    CHECK(o.result["cuda_visible_devices"].is_null()); // no GPU list: environment untouched
  }
  const auto detail = archive.load_run(run_id);
  CHECK(detail.trials.size() == 4);
  CHECK(detail.artifacts.size() == 4); // one log per attempt
  for (const auto& t : detail.trials) {
    CHECK(t.status == "succeeded");
    CHECK(t.exit_code == 0);
  }
}

TEST_CASE_FIXTURE(PoolFixture, "a second pool in the same run continues the trial numbering") {
  WorkerPool(options()).run({task({{"task", "echo"}})});
  PoolOptions second = options();
  second.first_trial_index = 1;
  const auto outcome = WorkerPool(second).run({task({{"task", "echo"}})}).front();
  CHECK(outcome.succeeded());
  const auto detail = archive.load_run(run_id);
  REQUIRE(detail.trials.size() == 2);
  CHECK(detail.trials[1].trial_index == 1);
  CHECK(std::filesystem::exists(dir / "work" / "trial-0001" / "attempt-1.log"));
}

TEST_CASE_FIXTURE(PoolFixture, "slots bound concurrency: 4 tasks on 2 slots run two at a time, never three") {
  std::filesystem::create_directories(dir / "present");
  std::vector<WorkerTask> tasks(4, task({{"task", "rendezvous"}, {"dir", (dir / "present").string()}, {"expect", 2}}));
  const auto outcomes = WorkerPool(options(2)).run(tasks);
  for (const auto& o : outcomes) {
    REQUIRE(o.succeeded());
    CHECK(o.result["most_at_once"] == 2); // each met a partner (parallel) and saw no third (bounded)
  }
}

TEST_CASE_FIXTURE(PoolFixture, "a hung child that ignores SIGTERM is killed within timeout + grace") {
  WorkerTask hang = task({{"task", "hang"}, {"ready_file", (dir / "ready").string()}});
  hang.timeout_s = 0.5;
  hang.grace_s = 0.5;
  test::GatedClock clock(all_exist({dir / "ready"})); // SIGTERM only once the child ignores it
  PoolOptions o = options();
  o.clock = &clock;
  const auto outcome = WorkerPool(o).run({hang}).front();
  CHECK(outcome.status == TrialStatus::timed_out);
  CHECK(outcome.signal == SIGKILL);
  CHECK(outcome.seconds >= 1.0); // timeout + grace passed in the pool's time before SIGKILL
  CHECK(outcome.error.find("timed out after") != std::string::npos);
  const auto detail = archive.load_run(run_id);
  CHECK(detail.trials.front().status == "timed_out");
  REQUIRE(detail.events.size() == 3);
  CHECK(detail.events[0].kind == "timeout");
  CHECK(detail.events[1].kind == "kill");
  CHECK(detail.events[2].kind == "trial_timed_out");
}

TEST_CASE_FIXTURE(PoolFixture, "a child that honours SIGTERM stops at the timeout without needing SIGKILL") {
  WorkerTask slow = task({{"task", "sleep"}, {"seconds", 600.0}});
  slow.timeout_s = 0.3;
  slow.grace_s = 1e6; // SIGKILL would come only after this long in the pool's time
  test::GatedClock clock;
  PoolOptions o = options();
  o.clock = &clock;
  const auto outcome = WorkerPool(o).run({slow}).front();
  CHECK(outcome.status == TrialStatus::timed_out);
  CHECK(outcome.signal == SIGTERM);
  CHECK(outcome.seconds < 1e6);
}

TEST_CASE_FIXTURE(PoolFixture, "a crashing child is retried as configured, then recorded failed with signal and log") {
  WorkerTask crash = task({{"task", "crash"}, {"signal", SIGABRT}});
  crash.retry.max_attempts = 3;
  crash.retry.retry_on_signal = true;
  const auto outcome = WorkerPool(options()).run({crash}).front();
  CHECK(outcome.status == TrialStatus::failed);
  CHECK(outcome.attempts == 3);
  CHECK(outcome.signal == SIGABRT);
  CHECK(outcome.error.find("SIGABRT") != std::string::npos);
  CHECK(outcome.error.find("about to crash with signal") != std::string::npos); // last log line

  const auto detail = archive.load_run(run_id);
  REQUIRE(detail.trials.size() == 3);
  for (int a = 0; a < 3; ++a) {
    const auto& t = detail.trials[static_cast<std::size_t>(a)];
    CHECK(t.attempt == a + 1);
    CHECK(t.status == "failed");
    CHECK(t.signal == SIGABRT);
  }
  std::vector<std::string> kinds;
  for (const auto& e : detail.events) {
    kinds.push_back(e.kind);
  }
  CHECK(kinds == std::vector<std::string>{"retry", "retry", "trial_failed"});
  REQUIRE(detail.artifacts.size() == 3);
  for (const auto& a : detail.artifacts) {
    CHECK(a.kind == "log");
    CHECK(test::read_text(a.path).find("about to crash") != std::string::npos);
  }
}

TEST_CASE_FIXTURE(PoolFixture, "failures not marked transient are not retried") {
  WorkerTask crash = task({{"task", "crash"}});
  crash.retry.max_attempts = 3; // but retry_on_signal is false
  WorkerTask exit2 = task({{"task", "exit"}, {"code", 2}});
  exit2.retry.max_attempts = 3;
  exit2.retry.retry_exit_codes = {75};
  const auto outcomes = WorkerPool(options()).run({crash, exit2});
  CHECK(outcomes[0].attempts == 1);
  CHECK(outcomes[1].attempts == 1);
  CHECK(outcomes[1].exit_code == 2);
}

TEST_CASE_FIXTURE(PoolFixture, "transient exit codes are retried with backoff until success") {
  WorkerTask flaky = task({{"task", "flaky"}, {"succeed_on_attempt", 3}});
  flaky.retry.max_attempts = 5;
  flaky.retry.retry_on_signal = true;
  flaky.retry.backoff_initial_s = 0.2;
  flaky.retry.backoff_factor = 2;
  test::GatedClock clock;
  PoolOptions o = options();
  o.clock = &clock;
  const auto outcome = WorkerPool(o).run({flaky}).front();
  CHECK(outcome.succeeded());
  CHECK(outcome.attempts == 3);
  CHECK(outcome.result["attempt"] == 3);
  CHECK(clock.monotonic_seconds() >= 0.2 + 0.4); // backoff before attempts 2 and 3
  const auto detail = archive.load_run(run_id);
  REQUIRE(detail.events.size() == 2);
  CHECK(detail.events[0].message.find("retrying in 0.2 s") != std::string::npos);
  CHECK(detail.events[1].message.find("retrying in 0.4 s") != std::string::npos);
}

TEST_CASE("backoff grows geometrically and is capped") {
  RetryPolicy p;
  p.backoff_initial_s = 1;
  p.backoff_factor = 3;
  p.backoff_max_s = 5;
  CHECK(p.backoff_before(2) == 1);
  CHECK(p.backoff_before(3) == 3);
  CHECK(p.backoff_before(4) == 5);
}

TEST_CASE_FIXTURE(PoolFixture, "each child gets its own GPU through CUDA_VISIBLE_DEVICES") {
  PoolOptions o = options(8);
  o.gpus = {3, 5};
  std::vector<WorkerTask> tasks(6, task({{"task", "echo"}}));
  const auto outcomes = WorkerPool(o).run(tasks);
  for (const auto& outcome : outcomes) {
    REQUIRE(outcome.succeeded());
    const auto gpu = outcome.result["gpu"];
    CHECK((gpu == 3 || gpu == 5));
    CHECK(outcome.result["cuda_visible_devices"] == std::to_string(gpu.get<int>()));
  }
}

TEST_CASE_FIXTURE(PoolFixture, "a timeout kills the worker's whole process tree") {
  std::filesystem::create_directories(dir / "pids");
  WorkerTask tree = task({{"task", "spawn-tree"},
                          {"children", 3},
                          {"pid_dir", (dir / "pids").string()},
                          {"ready_file", (dir / "ready").string()}});
  tree.timeout_s = 1.0;
  tree.grace_s = 0.3;
  test::GatedClock clock(all_exist({dir / "ready"})); // the timeout comes after every grandchild started
  PoolOptions o = options();
  o.clock = &clock;
  const auto outcome = WorkerPool(o).run({tree}).front();
  CHECK(outcome.status == TrialStatus::timed_out);
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "pids")) {
    pids.push_back(static_cast<pid_t>(std::stol(entry.path().filename().string())));
  }
  CHECK(pids.size() == 4);
  for (const pid_t pid : pids) {
    CAPTURE(pid);
    // SIGKILL went to the group before run() returned; orphans are reaped by init in its own time.
    CHECK(test::wait_until([&] { return test::process_gone(pid); }, 60.0));
  }
}

TEST_CASE_FIXTURE(PoolFixture, "an interrupt stops every child, records them interrupted and throws Interrupted") {
  std::vector<WorkerTask> tasks;
  std::vector<std::filesystem::path> ready;
  for (int i = 0; i < 3; ++i) {
    ready.push_back(dir / fmt::format("ready-{}", i));
    tasks.push_back(task({{"task", "hang"}, {"ready_file", ready.back().string()}}));
  }
  test::GatedClock clock(all_exist(ready));
  clock.on_open([] { request_interrupt(SIGINT); }); // Ctrl-C once all three are running
  PoolOptions o = options(3);
  o.clock = &clock;
  CHECK_THROWS_AS(WorkerPool(o).run(tasks), Interrupted);
  reset_interrupt();
  CHECK(clock.monotonic_seconds() >= 1.0); // SIGKILL only after grace_s (1 s) of the pool's time
  const auto detail = archive.load_run(run_id);
  REQUIRE(detail.trials.size() == 3);
  for (const auto& t : detail.trials) {
    CHECK(t.status == "interrupted");
    CHECK(t.signal == SIGKILL); // they ignore SIGTERM
  }
  CHECK(detail.events.size() == 3);
}

TEST_CASE_FIXTURE(PoolFixture, "a child that exits 0 without a result is a failure, not a success") {
  const auto outcome = WorkerPool(options()).run({task({{"task", "exit"}, {"code", 0}})}).front();
  CHECK(outcome.status == TrialStatus::failed);
  CHECK(outcome.error.find("without writing a valid result") != std::string::npos);
}

TEST_CASE_FIXTURE(PoolFixture, "a worker's own input error is reported with its message") {
  const auto outcome = WorkerPool(options()).run({task({{"task", "no-such-task"}})}).front();
  CHECK(outcome.exit_code == 2);
  CHECK(outcome.error.find("unknown task 'no-such-task'") != std::string::npos);
}

TEST_CASE_FIXTURE(PoolFixture, "an executable that cannot start fails the task with its path") {
  PoolOptions o = options();
  o.executable = dir / "no-such-binary";
  const auto outcome = WorkerPool(o).run({task({{"task", "echo"}})}).front();
  CHECK(outcome.status == TrialStatus::failed);
  CHECK(outcome.error.find("no-such-binary") != std::string::npos);
}
