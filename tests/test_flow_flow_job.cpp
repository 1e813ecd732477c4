// Flow job files: paths relative to the file, bundled names kept as names, schema errors with
// file:line:col, and validation that names the key and value before anything runs.
#include "flow/flow_job.hpp"
#include "flow/flow_stages.hpp"

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>

using namespace optkit;
using namespace optkit::flow;
namespace fs = std::filesystem;

namespace {

fs::path
write_job(const test::ScratchDir& dir, const std::string& text) {
  const fs::path file = dir / "job.yaml";
  std::ofstream(file) << text;
  return file;
}

std::string
job_text(const std::string& recipes, const std::string& slo = "e2e:p95<=2s") {
  const std::string data = test::testdata_dir().string();
  return "name: t\nmodel: " + data + "/models/tiny-arith\noutput: out\ncompress:\n  recipes: " + recipes +
         "\n  calib: " + data + "/corpora/english.calib.txt\ngate:\n  suite: arith\n  rules: gate.yaml\n" +
         "bench:\n  profile: chat-small\n  slo: [\"" + slo + "\"]\n";
}

} // namespace

TEST_CASE("paths in a job are relative to its file; bundled names stay names; it round-trips through JSON") {
  test::ScratchDir dir;
  std::ofstream(dir / "gate.yaml")
      << "rules:\n  - {suite: arith, metric: 'exact_match,strict-match', min_recovery: 0.9}\n";
  std::ofstream(dir / "mine.yaml") << "name: mine\nscheme: w4a16\nmethod: rtn\n";
  const auto job = load_flow_job(write_job(dir, job_text("[int_w8a8, ./mine.yaml]")).string());
  CHECK(job.output == (dir / "out").string());
  CHECK(job.gate.gate == (dir / "gate.yaml").string());
  REQUIRE(job.compress.recipes.size() == 2);
  CHECK(job.compress.recipes[0] == "int_w8a8");
  CHECK(job.compress.recipes[1] == (dir / "mine.yaml").string());
  CHECK(job.compress.trials == 3);
  CHECK(job.slots == 2);
  const auto back = flow_job_from_json(to_json(job));
  CHECK(to_json(back) == to_json(job));
}

TEST_CASE("bench.max_trial_seconds reaches bench's --max-trial-seconds and the bench task's key; default 600") {
  test::ScratchDir dir;
  std::ofstream(dir / "gate.yaml")
      << "rules:\n  - {suite: arith, metric: 'exact_match,strict-match', min_recovery: 0.9}\n";
  const auto argv_value = [&](const FlowJob& job, const std::string& flag) {
    const auto argv = bench_task(job, "bench", "").command(dir.path(), {});
    const auto it = std::find(argv.begin(), argv.end(), flag);
    REQUIRE(it != argv.end());
    REQUIRE(std::next(it) != argv.end());
    return *std::next(it);
  };
  const auto defaults = load_flow_job(write_job(dir, job_text("[int_w8a8]")).string());
  CHECK(defaults.bench.max_trial_seconds == 600);
  CHECK(argv_value(defaults, "--max-trial-seconds") == "600");
  const auto capped = load_flow_job(write_job(dir, job_text("[int_w8a8]") + "  max_trial_seconds: 20\n").string());
  CHECK(capped.bench.max_trial_seconds == 20);
  CHECK(argv_value(capped, "--max-trial-seconds") == "20");
  CHECK(bench_task(capped, "bench", "").spec != bench_task(defaults, "bench", "").spec);
  CHECK(flow_job_from_json(to_json(capped)).bench.max_trial_seconds == 20);
}

TEST_CASE("the baseline's key names the archive its run id lives in; the compress tasks' keys do not") {
  test::ScratchDir dir;
  std::ofstream(dir / "gate.yaml")
      << "rules:\n  - {suite: arith, metric: 'exact_match,strict-match', min_recovery: 0.9}\n";
  const auto job = load_flow_job(write_job(dir, job_text("[int_w8a8]")).string());
  const auto keys = [&](const fs::path& archive) {
    std::map<std::string, std::string> by_name;
    for (const auto& task : first_wave(job, archive))
      by_name[task.name] = task_key(task, by_name);
    return by_name;
  };
  const auto a = keys(dir / "a.db"), a_again = keys(dir / "a.db"), b = keys(dir / "b.db");
  CHECK(a == a_again);
  CHECK(a.at("baseline") != b.at("baseline"));
  CHECK(a.at(gate_name("int_w8a8", 0)) != b.at(gate_name("int_w8a8", 0))); // gates read the baseline
  CHECK(a.at(compress_name("int_w8a8", 0)) == b.at(compress_name("int_w8a8", 0)));
}

TEST_CASE("a malformed job names the file, line and column; an unknown key suggests the right one") {
  test::ScratchDir dir;
  const auto file = write_job(dir, job_text("[int_w8a8]") + "executor:\n  slot: 2\n");
  CHECK_THROWS_WITH_AS(load_flow_job(file.string()), doctest::Contains("job.yaml:"), InputError);
  CHECK_THROWS_WITH_AS(load_flow_job(file.string()), doctest::Contains("slots"), InputError);
}

TEST_CASE("validation names the key and value of the first reference that does not resolve") {
  test::ScratchDir dir;
  std::ofstream(dir / "gate.yaml")
      << "rules:\n  - {suite: arith, metric: 'exact_match,strict-match', min_recovery: 0.9}\n";
  validate_flow_job(load_flow_job(write_job(dir, job_text("[int_w8a8]")).string()));
  CHECK_THROWS_WITH_AS(validate_flow_job(load_flow_job(write_job(dir, job_text("[int_w9a9]")).string())),
                       doctest::Contains("compress.recipes 'int_w9a9'"), InputError);
  CHECK_THROWS_WITH_AS(validate_flow_job(load_flow_job(write_job(dir, job_text("[int_w8a8]", "e2e:p95<=")).string())),
                       doctest::Contains("bench.slo"), InputError);
  CHECK_THROWS_WITH_AS(validate_flow_job(load_flow_job(write_job(dir, job_text("[delta_2of4_int4]")).string())),
                       doctest::Contains("a delta recipe"), InputError);
}

TEST_CASE("a job.json optkit did not write is an InputError, not a crash or a graph that never starts") {
  test::ScratchDir dir;
  std::ofstream(dir / "gate.yaml")
      << "rules:\n  - {suite: arith, metric: 'exact_match,strict-match', min_recovery: 0.9}\n";
  const auto job = load_flow_job(write_job(dir, job_text("[int_w8a8]")).string());
  auto j = to_json(job);
  j["executor"]["slots"] = 0;
  CHECK_THROWS_WITH_AS(flow_job_from_json(j), doctest::Contains("slots"), InputError);
  j = to_json(job);
  j["compress"].erase("recipes");
  CHECK_THROWS_WITH_AS(flow_job_from_json(j), doctest::Contains("not a flow job as optkit writes it"), InputError);
  CHECK_THROWS_AS(flow_job_from_json(nlohmann::json::array()), InputError);
}
