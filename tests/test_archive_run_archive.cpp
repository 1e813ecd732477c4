#include "archive/run_archive.hpp"

#include "archive/recorded_run.hpp"
#include "archive/sqlite_db.hpp"
#include "core/error.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit;
using namespace optkit::archive;

namespace {

NewRun
new_run(const std::string& command) {
  return {command, nlohmann::json::array({"optkit", command}), {{"seed", 1}}};
}

} // namespace

TEST_CASE("a run with trials, metrics, artifacts and events round-trips") {
  test::ScratchDir dir;
  FakeClock clock;
  RunArchive archive(dir / "a.db", clock);
  const auto run = archive.begin_run(new_run("compress"));
  const auto trial = archive.begin_trial(run, 0, 1, {{"samples", 128}});
  archive.add_metric(run, trial, {"ppl", 12.5, "", std::nullopt});
  archive.add_metric(run, trial, {"loss", 0.25, "nats", 3});
  archive.add_metric(run, std::nullopt, {"nan", std::nan(""), "", std::nullopt});
  test::write_text(dir / "log.txt", "hello");
  archive.add_artifact(run, trial, dir / "log.txt", "log");
  archive.add_event(run, trial, "warn", "retry", "attempt 1 failed", {{"signal", 6}});
  clock.advance(2);
  archive.finish_trial(trial, {TrialStatus::failed, std::nullopt, 6, nullptr, "SIGABRT"});
  archive.finish_run(run, RunStatus::failed, 3, "1 of 1 trials failed");

  const RunDetail d = archive.load_run(run);
  CHECK(d.run.command == "compress");
  CHECK(d.run.status == "failed");
  CHECK(d.run.exit_code == 3);
  CHECK(d.run.error == "1 of 1 trials failed");
  CHECK(d.run.config["seed"] == 1);
  CHECK(*d.run.ended_at - d.run.started_at == 2000);
  REQUIRE(d.trials.size() == 1);
  CHECK(d.trials[0].params["samples"] == 128);
  CHECK(d.trials[0].status == "failed");
  CHECK(d.trials[0].signal == 6);
  CHECK_FALSE(d.trials[0].exit_code.has_value());
  REQUIRE(d.metrics.size() == 3);
  CHECK(d.metrics[1].step == 3);
  CHECK(d.metrics[1].unit == "nats");
  CHECK_FALSE(d.metrics[2].value.has_value()); // NaN is stored as NULL, not lost
  REQUIRE(d.artifacts.size() == 1);
  CHECK(d.artifacts[0].sha256 == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  CHECK(d.artifacts[0].bytes == 5);
  REQUIRE(d.events.size() == 1);
  CHECK(d.events[0].data["signal"] == 6);
}

TEST_CASE("list_runs filters by command, prefix, status and time, newest first") {
  test::ScratchDir dir;
  FakeClock clock;
  RunArchive archive(dir / "a.db", clock);
  const auto a = archive.begin_run(new_run("compress"));
  archive.finish_run(a, RunStatus::succeeded, 0, "");
  clock.advance(3600);
  const auto b = archive.begin_run(new_run("compress delta"));
  archive.finish_run(b, RunStatus::failed, 2, "bad recipe");
  clock.advance(3600);
  const auto c = archive.begin_run(new_run("bench"));
  archive.finish_run(c, RunStatus::succeeded, 0, "");

  const auto ids = [&](const RunFilter& f) {
    std::vector<std::int64_t> out;
    for (const auto& r : archive.list_runs(f)) {
      out.push_back(r.id);
    }
    return out;
  };
  CHECK(ids({}) == std::vector<std::int64_t>{c, b, a});
  CHECK(ids({.command = "compress"}) == std::vector<std::int64_t>{a});
  CHECK(ids({.command = "compress*"}) == std::vector<std::int64_t>{b, a});
  CHECK(ids({.status = "succeeded"}) == std::vector<std::int64_t>{c, a});
  CHECK(ids({.since = clock.wall_ms() - 3600 * 1000}) == std::vector<std::int64_t>{c, b});
  CHECK(ids({.limit = 1}) == std::vector<std::int64_t>{c});
  CHECK(ids({.command = "tune"}).empty());
}

TEST_CASE("a running run whose process is gone reads as abandoned, and so do its running trials") {
  test::ScratchDir dir;
  RunArchive archive(dir / "a.db");
  const auto run = archive.begin_run(new_run("compress"));
  archive.begin_trial(run, 0, 1, {});
  CHECK(archive.find_run(run)->status == "running"); // this process is alive
  CHECK(archive.load_run(run).trials.at(0).status == "running");
  {
    Database db((dir / "a.db").string());
    db.exec("UPDATE runs SET pid = 999999999");
  }
  CHECK(archive.find_run(run)->status == "abandoned");
  CHECK(archive.list_runs({.status = "abandoned"}).size() == 1);
  CHECK(archive.list_runs({.status = "running"}).empty());
  CHECK(archive.load_run(run).trials.at(0).status == "abandoned"); // and so is its running trial
}

TEST_CASE("resolve_run accepts ids and 'last', and names what is wrong") {
  test::ScratchDir dir;
  RunArchive archive(dir / "a.db");
  CHECK_THROWS_WITH_AS(archive.resolve_run("last"), doctest::Contains("has no runs yet"), InputError);
  const auto run = archive.begin_run(new_run("x"));
  CHECK(archive.resolve_run("last") == run);
  CHECK(archive.resolve_run(std::to_string(run)) == run);
  CHECK_THROWS_WITH_AS(archive.resolve_run("42"), doctest::Contains("run 42 is not in archive"), InputError);
  CHECK_THROWS_WITH_AS(archive.resolve_run("abc"), doctest::Contains("expected a run id"), InputError);
  CHECK_THROWS_AS(archive.resolve_run("-1"), InputError);
}

TEST_CASE("removing a run removes everything under it and its run directory, nothing else") {
  test::ScratchDir dir;
  RunArchive archive(dir / "a.db");
  const auto keep = archive.begin_run(new_run("keep"));
  const auto drop = archive.begin_run(new_run("drop"));
  for (const auto run : {keep, drop}) {
    const auto trial = archive.begin_trial(run, 0, 1, {});
    archive.add_metric(run, trial, {"m", 1, "", std::nullopt});
    archive.add_event(run, trial, "info", "k", "msg");
    std::filesystem::create_directories(archive.run_directory(run));
    test::write_text(archive.run_directory(run) / "attempt-1.log", "log");
    archive.add_artifact(run, trial, archive.run_directory(run) / "attempt-1.log", "log");
  }
  test::write_text(dir / "model.bin", "user output");
  archive.add_artifact(drop, std::nullopt, dir / "model.bin", "model");

  CHECK(remove_run_with_files(archive, drop) == 2); // the directory and its log
  CHECK_FALSE(archive.find_run(drop));
  CHECK(archive.find_run(keep));
  CHECK(archive.count("trials") == 1);
  CHECK(archive.count("metrics") == 1);
  CHECK(archive.count("events") == 1);
  CHECK(archive.count("artifacts") == 1);
  CHECK_FALSE(std::filesystem::exists(archive.run_directory(drop)));
  CHECK(std::filesystem::exists(archive.run_directory(keep)));
  CHECK(std::filesystem::exists(dir / "model.bin")); // never delete user outputs
  CHECK(archive.integrity_check() == "ok");
}

TEST_CASE("a failed transaction leaves nothing behind") {
  test::ScratchDir dir;
  RunArchive archive(dir / "a.db");
  const auto run = archive.begin_run(new_run("x"));
  CHECK_THROWS_AS(archive.transaction([&] {
    archive.begin_trial(run, 0, 1, {});
    archive.begin_trial(run, 0, 1, {}); // violates UNIQUE (run, trial, attempt)
  }),
                  RuntimeFailure);
  CHECK(archive.count("trials") == 0);
}

TEST_CASE("record_run records success, each failure category and interruption") {
  test::ScratchDir dir;
  RunArchive archive(dir / "a.db");
  record_run(archive, new_run("ok"), [](std::int64_t) {});
  CHECK(archive.find_run(archive.resolve_run("last"))->status == "succeeded");

  const auto expect = [&](auto thrower, const std::string& status, int code) {
    CHECK_THROWS(record_run(archive, new_run("x"), thrower));
    const auto run = archive.find_run(archive.resolve_run("last"));
    CHECK(run->status == status);
    CHECK(run->exit_code == code);
    CHECK_FALSE(run->error.empty());
    CHECK(run->ended_at.has_value());
  };
  expect([](std::int64_t) { throw GoalNotMet("SLO missed"); }, "goal_not_met", 1);
  expect([](std::int64_t) { throw InputError("bad flag"); }, "failed", 2);
  expect([](std::int64_t) { throw RuntimeFailure("crash"); }, "failed", 3);
  expect([](std::int64_t) { throw Interrupted("ctrl-c"); }, "interrupted", 130);
  expect([](std::int64_t) { throw std::runtime_error("surprise"); }, "failed", 3);
}

TEST_CASE("a garbage archive file is refused at once, naming it; only a lock held elsewhere is retried") {
  test::ScratchDir scratch;
  const auto garbage = scratch.path() / "garbage.db";
  test::write_text(garbage, std::string(100000, 'g'));
  {
    Database db(garbage.string());
    CHECK_THROWS_AS(db.exec("PRAGMA journal_mode = WAL"), RuntimeFailure);
    CHECK_FALSE(db.failed_on_lock()); // what RunArchive does not retry
  }
  CHECK_THROWS_WITH_AS(RunArchive{garbage}, doctest::Contains("not a valid SQLite database"), RuntimeFailure);
  // A lock another connection holds: worth a retry.
  const auto locked = scratch.path() / "locked.db";
  Database holder(locked.string());
  holder.exec("CREATE TABLE t (x); BEGIN EXCLUSIVE");
  Database other(locked.string());
  other.exec("PRAGMA busy_timeout = 0");
  CHECK_THROWS_AS(other.exec("INSERT INTO t VALUES (1)"), RuntimeFailure);
  CHECK(other.failed_on_lock());
  holder.exec("COMMIT");
}
