// The flow's task graph: tasks are real child processes (/bin/sh scripts), so what is pinned is
// the graph's contract — order by inputs, results handed on, finished work reused and never rerun,
// a killed attempt's folder redone, bounded retries of crashes, failed inputs failing their readers.
#include "flow/task_graph.hpp"

#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <fstream>

using namespace optkit;
using namespace optkit::flow;
namespace fs = std::filesystem;

namespace {

// A task whose command is a shell script; it appends its name to `log` so tests see what ran.
FlowTask
sh_task(const std::string& name, const std::string& script, std::vector<std::string> reads = {},
        nlohmann::json spec = nullptr) {
  FlowTask t;
  t.name = name;
  t.stage = "test";
  t.spec = spec.is_null() ? nlohmann::json(script) : spec;
  t.reads = std::move(reads);
  t.command = [script](const fs::path& dir, const std::map<std::string, TaskResult>& results) {
    std::string s = "cd '" + dir.string() + "' && " + script;
    for (const auto& [n, r] : results)
      if (r.output.is_object() && r.output.contains("v"))
        s = "export IN_" + std::to_string(r.output["v"].get<int>()) + "=1; " + s;
    return std::vector<std::string>{s};
  };
  return t;
}

GraphOptions
options_in(const test::ScratchDir& dir) {
  GraphOptions o;
  o.work_dir = dir / "work";
  o.executable = "/bin/sh";
  o.global_args = {"-c"};
  o.slots = 2;
  o.retries = 1;
  return o;
}

int
lines(const fs::path& file) {
  std::ifstream in(file);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    ++n;
  return n;
}

} // namespace

TEST_CASE("a task runs after its inputs, sees their results, and a finished graph is reused, not rerun") {
  test::ScratchDir dir;
  const std::string log = (dir / "ran.log").string();
  std::vector<FlowTask> tasks = {
      sh_task("a", "echo a >> " + log + "; echo '{\"v\": 7}'"),
      sh_task("b", "test -n \"$IN_7\" && echo b >> " + log + " && echo '{\"v\": 8}'", {"a"}),
  };
  auto first = run_task_graph(tasks, options_in(dir));
  CHECK(first.failed.empty());
  REQUIRE(first.finished.count("b") == 1);
  CHECK(first.finished.at("b").output.at("v") == 8);
  CHECK(lines(log) == 2);
  CHECK(fs::is_regular_file(first.finished.at("b").dir / "result.json"));

  auto second = run_task_graph(tasks, options_in(dir));
  CHECK(lines(log) == 2); // nothing ran again
  CHECK(second.finished.at("a").reused);
  CHECK(second.finished.at("b").output.at("v") == 8);
}

TEST_CASE("a changed input changes the key of every task that reads it, so they run again") {
  test::ScratchDir dir;
  const std::string log = (dir / "ran.log").string();
  auto graph = [&](int version) {
    return std::vector<FlowTask>{
        sh_task("a", "echo a >> " + log + "; echo '{}'", {}, {{"version", version}}),
        sh_task("b", "echo b >> " + log + "; echo '{}'", {"a"}, "same spec"),
    };
  };
  run_task_graph(graph(1), options_in(dir));
  CHECK(lines(log) == 2);
  const auto again = run_task_graph(graph(2), options_in(dir));
  CHECK(lines(log) == 4);
  CHECK_FALSE(again.finished.at("b").reused);
  std::map<std::string, std::string> keys{{"a", "k1"}};
  const auto b = graph(1)[1];
  CHECK(task_key(b, keys) != task_key(b, {{"a", "k2"}}));
}

TEST_CASE("a folder left by a killed attempt (no result.json) is cleared and the task redone") {
  test::ScratchDir dir;
  const auto tasks = std::vector<FlowTask>{sh_task("a", "test ! -e leftover && echo '{}'")};
  const auto first = run_task_graph(tasks, options_in(dir));
  const fs::path folder = first.finished.at("a").dir;
  fs::remove(folder / "result.json");
  std::ofstream(folder / "leftover") << "half-written";
  const auto second = run_task_graph(tasks, options_in(dir));
  CHECK(second.failed.empty());
  CHECK_FALSE(second.finished.at("a").reused);
  CHECK_FALSE(fs::exists(folder / "leftover"));
}

TEST_CASE("a crash is retried a bounded number of times; its readers fail; other work goes on") {
  test::ScratchDir dir;
  const std::string attempts = (dir / "attempts.log").string();
  auto options = options_in(dir);
  options.retries = 2;
  const auto outcome = run_task_graph({sh_task("crashes", "echo x >> " + attempts + "; echo 'worker died' >&2; exit 3"),
                                       sh_task("reader", "echo '{}'", {"crashes"}), sh_task("other", "echo '{}'"),
                                       sh_task("bad-input", "echo 'no such flag' >&2; exit 2")},
                                      options);
  CHECK(lines(attempts) == 3); // one attempt and two retries
  REQUIRE(outcome.failed.count("crashes") == 1);
  CHECK(outcome.failed.at("crashes").find("worker died") != std::string::npos);
  CHECK(outcome.failed.at("reader") == "an input failed");
  CHECK(outcome.finished.count("other") == 1);
  CHECK(outcome.failed.count("bad-input") == 1); // exit 2 is not transient: no retry
}

TEST_CASE("an exit code the task declares an outcome (a failed gate) is a finished result, not a failure") {
  test::ScratchDir dir;
  auto gate = sh_task("gate", "echo '{\"passed\": false}'; exit 1");
  gate.finished_exits = {0, 1};
  const auto outcome = run_task_graph({gate, sh_task("not-json", "echo oops")}, options_in(dir));
  REQUIRE(outcome.finished.count("gate") == 1);
  CHECK(outcome.finished.at("gate").exit_code == 1);
  CHECK(outcome.finished.at("gate").output.at("passed") == false);
  REQUIRE(outcome.failed.count("not-json") == 1);
  CHECK(outcome.failed.at("not-json").find("no JSON result") != std::string::npos);
}
