// Many writer processes into one archive, and a writer killed mid-run: the archive's promises.
#include "archive/run_archive.hpp"

#include "core/text.hpp"
#include "proc/child_process.hpp"
#include "proc/worker_spec.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <map>
#include <set>

using namespace optkit;
using namespace optkit::archive;

namespace {

// Starts `optkit internal-test --worker SPEC` writing `trials` trials into the archive directly.
std::unique_ptr<proc::ChildProcess>
start_writer(const test::ScratchDir& dir, const std::filesystem::path& db, std::int64_t run_id, int writer,
             int trials) {
  proc::WorkerSpec spec;
  spec.run_id = run_id;
  spec.trial_index = writer;
  spec.archive = db.string();
  spec.result_path = dir / ("result-" + std::to_string(writer) + ".json");
  spec.payload = {{"task", "write-archive"}, {"trials", trials}, {"metrics", 3}, {"base_index", writer * 1'000'000}};
  const auto spec_path = dir / ("spec-" + std::to_string(writer) + ".json");
  test::write_text(spec_path, proc::to_json(spec).dump());
  return std::make_unique<proc::ChildProcess>(
      test::optkit_binary(),
      std::vector<std::string>{"--archive", db.string(), "-q", "internal-test", "--worker", spec_path.string()},
      dir / ("writer-" + std::to_string(writer) + ".log"));
}

// Creates the archive at `db` with one run for the writers to fill; returns the run's id.
std::int64_t
new_archive_with_run(const std::filesystem::path& db, const std::string& command) {
  RunArchive archive(db);
  return archive.begin_run({command, nlohmann::json::array(), nlohmann::json::object()});
}

} // namespace

TEST_CASE("16 processes writing 500 trials each lose nothing and keep the archive sound") {
  test::ScratchDir dir;
  const auto db = dir / "shared.db";
  const std::int64_t run_id = new_archive_with_run(db, "concurrency");
  std::vector<std::unique_ptr<proc::ChildProcess>> writers;
  for (int w = 0; w < 16; ++w) {
    writers.push_back(start_writer(dir, db, run_id, w, 500));
  }
  for (int w = 0; w < 16; ++w) {
    const auto status = writers[static_cast<std::size_t>(w)]->wait();
    CAPTURE(test::read_text(dir / ("writer-" + std::to_string(w) + ".log")));
    CHECK(status.exit_code == 0);
  }
  RunArchive archive(db);
  CHECK(archive.count("trials") == 8000);
  CHECK(archive.count("metrics") == 24000);
  CHECK(archive.integrity_check() == "ok");
  const RunDetail detail = archive.load_run(run_id);
  std::set<std::int64_t> indexes;
  for (const auto& t : detail.trials) {
    indexes.insert(t.trial_index);
    CHECK(t.status == "succeeded");
  }
  CHECK(indexes.size() == 8000);
}

TEST_CASE("a writer killed with SIGKILL mid-run loses nothing it had committed") {
  test::ScratchDir dir;
  const auto db = dir / "killed.db";
  const std::int64_t run_id = new_archive_with_run(db, "durability");
  auto writer = start_writer(dir, db, run_id, 0, 1'000'000);
  const auto log = dir / "writer-0.log";
  const auto committed_lines = [&] {
    const std::string text = test::read_text(log);
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  };
  REQUIRE(test::wait_until([&] { return committed_lines() >= 300; }, 60));
  ::kill(writer->pid(), SIGKILL);
  const auto status = writer->wait();
  CHECK(status.signal == SIGKILL);

  // Every id the writer printed was printed after its COMMIT returned.
  std::vector<std::int64_t> committed;
  for (const auto& line : split(test::read_text(log), '\n')) {
    if (line.rfind("committed ", 0) == 0) {
      committed.push_back(std::stoll(line.substr(10)));
    }
  }
  REQUIRE(committed.size() >= 300);
  RunArchive archive(db);
  CHECK(archive.integrity_check() == "ok");
  const RunDetail detail = archive.load_run(run_id);
  std::set<std::int64_t> present;
  for (const auto& t : detail.trials) {
    present.insert(t.id);
  }
  std::map<std::int64_t, int> metrics_per_trial;
  for (const auto& m : detail.metrics) {
    ++metrics_per_trial[*m.trial_id];
  }
  for (const auto id : committed) {
    CAPTURE(id);
    CHECK(present.contains(id));
    CHECK(metrics_per_trial[id] == 3);
  }
  // Whatever was in flight is either wholly there or wholly absent.
  for (const auto& [trial, count] : metrics_per_trial) {
    CHECK(count == 3);
  }
}
