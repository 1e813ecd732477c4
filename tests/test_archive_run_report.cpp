#include "archive/run_report.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::archive;

namespace {

RunDetail
detail_with(std::int64_t id, nlohmann::json config, std::vector<std::pair<std::string, double>> metrics) {
  RunDetail d;
  d.run.id = id;
  d.run.command = "compress";
  d.run.status = "succeeded";
  d.run.config = std::move(config);
  d.run.started_at = 1'700'000'000'000;
  d.run.ended_at = d.run.started_at + 1500;
  std::int64_t metric_id = 0;
  for (const auto& [name, value] : metrics) {
    d.metrics.push_back({++metric_id, id, std::nullopt, name, value, "u", std::nullopt, d.run.started_at});
  }
  return d;
}

} // namespace

TEST_CASE("metric summaries give count, mean and sample standard deviation") {
  const auto d = detail_with(1, {}, {{"ppl", 10}, {"ppl", 12}, {"ppl", 14}, {"size", 5}});
  const auto summary = summarize_metrics(d);
  REQUIRE(summary.size() == 2);
  CHECK(summary.begin()->first == "ppl");
  CHECK(summary.at("ppl").count == 3);
  CHECK(summary.at("ppl").mean == doctest::Approx(12));
  CHECK(summary.at("ppl").stddev == doctest::Approx(2));
  CHECK(summary.at("size").stddev == 0);
}

TEST_CASE("compare lists differing config keys and metric deltas") {
  const auto a = detail_with(1, {{"options", {{"--recipe", "w4"}, {"--seed", "1"}}}}, {{"ppl", 10}, {"only_a", 1}});
  const auto b = detail_with(2, {{"options", {{"--recipe", "w8"}, {"--seed", "1"}}}}, {{"ppl", 12}});
  const auto rows = compare_runs(a, b).to_json();
  const auto row = [&](const std::string& item) {
    for (const auto& r : rows) {
      if (r["item"] == item) {
        return r;
      }
    }
    return nlohmann::json();
  };
  CHECK(row("config.options.--recipe")["run 1"] == "w4");
  CHECK(row("config.options.--recipe")["run 2"] == "w8");
  CHECK(row("config.options.--seed").is_null()); // equal keys are not listed
  CHECK(row("metric.ppl")["delta"].get<double>() == doctest::Approx(2));
  CHECK(row("metric.ppl")["change_pct"].get<double>() == doctest::Approx(20));
  CHECK(row("metric.only_a")["run 2"].is_null());
}

TEST_CASE("a run's JSON carries ISO times, duration and every section") {
  const auto d = detail_with(3, {{"x", 1}}, {{"m", 1.5}});
  const auto j = run_detail_json(d);
  CHECK(j["started_at"] == "2023-11-14T22:13:20.000Z");
  CHECK(j["duration_s"].get<double>() == doctest::Approx(1.5));
  CHECK(j["metrics"][0]["value"] == 1.5);
  CHECK(j["trials"].is_array());
  CHECK(j["artifacts"].is_array());
  CHECK(j["events"].is_array());
  CHECK(metrics_table(d).render_csv().rfind(
            "run_id,trial_index,attempt,name,value,unit,step,recorded_at\n3,,,m,1.5,u,,", 0) == 0);
}
