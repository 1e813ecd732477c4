// Studies with a scripted evaluator: resume equivalence, SLO-first winners, invalid
// configurations recorded without running, and re-measurement of the finalists.
#include "tune/sim_evaluator.hpp"
#include "tune/study.hpp"
#include "tune/tune_run.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <set>

using namespace optkit;
using namespace optkit::tune;

namespace {

const char* space_yaml = "name: s\nparameters:\n  - {name: x, type: int, low: 0, high: 40, default: 5}\n";

// value = x (bigger is better), SLO met only for x ≤ 25, noisy by the seed; x = 13 "crashes".
class Scripted final : public TrialEvaluator {
public:
  TrialOutcome evaluate(const nlohmann::json& config, std::uint64_t seed, const TrialContext& context) override {
    ++calls;
    {
      std::lock_guard lock(mutex);
      gpus.insert(context.gpus);
    }
    const double x = config["x"].get<double>();
    TrialOutcome o;
    if (x == 13) {
      o.status = TrialStatus::crashed;
      o.error = "engine exited with SIGSEGV";
      o.violation = 10;
      return o;
    }
    o.value = x + static_cast<double>(seed % 7) * 0.01;
    o.violation = x > 25 ? (x - 25) / 25 : 0;
    o.metrics = {{"x", x}};
    return o;
  }
  std::string invalid_reason(const nlohmann::json& config) const override {
    return config["x"] == 7 ? "x = 7 breaks the engine's rule" : "";
  }
  std::string launch_command(const nlohmann::json& config) const override { return "engine --x " + config["x"].dump(); }
  std::atomic<int> calls = 0;
  std::mutex mutex;
  std::set<std::string> gpus; // the device lists trials were given
};

} // namespace

TEST_CASE("a resumed study takes completed trials over and proposes exactly what the full one did") {
  const auto s = parse_search_space(space_yaml, "s");
  StudyOptions o;
  o.trials = 25;
  o.seed = 4;
  Scripted full_eval;
  auto full_opt = make_tpe(s, TpeOptions{}, o.seed);
  auto full_exec = make_local_executor(full_eval, 1, {});
  const auto full = run_study(s, *full_opt, full_eval, *full_exec, o, {}, {});

  std::vector<StudyTrial> first(full.trials.begin(), full.trials.begin() + 12);
  Scripted resumed_eval;
  auto resumed_opt = make_tpe(s, TpeOptions{}, o.seed);
  auto resumed_exec = make_local_executor(resumed_eval, 1, {});
  const auto resumed = run_study(s, *resumed_opt, resumed_eval, *resumed_exec, o, first, {});
  REQUIRE(resumed.trials.size() == full.trials.size());
  for (std::size_t i = 0; i < full.trials.size(); ++i) {
    CHECK(resumed.trials[i].config == full.trials[i].config);
    CHECK(resumed.trials[i].resumed == (i < 12));
  }
  int measured_now = 0;
  for (const auto& t : resumed.trials)
    measured_now += !t.resumed && t.outcome.status != TrialStatus::invalid ? 1 : 0;
  CHECK(resumed_eval.calls == measured_now); // nothing completed was run again
  CHECK(measured_now < full_eval.calls);
  CHECK(*resumed.best == *full.best);
}

TEST_CASE("the winner met the SLO in every measurement; failures are recorded, not fatal") {
  const auto s = parse_search_space(space_yaml, "s");
  StudyOptions o;
  o.trials = 40;
  o.top_k = 3;
  o.replicates = 2;
  Scripted eval;
  auto grid = make_grid_search(s, 3);
  auto exec = make_local_executor(eval, 1, {});
  const auto r = run_study(s, *grid, eval, *exec, o, {}, {});
  REQUIRE(r.best.has_value());
  CHECK((*r.best)["x"] == 25); // 26..40 score higher but miss the SLO
  CHECK(r.best_values.size() == 3);
  CHECK(r.trials.front().phase == StudyPhase::baseline);
  CHECK(r.trials.front().config["x"] == 5);
  REQUIRE(r.baseline_median.has_value());
  bool invalid = false, crashed = false;
  for (const auto& t : r.trials) {
    if (t.config["x"] == 7 && t.phase == StudyPhase::search) {
      invalid = t.outcome.status == TrialStatus::invalid;
      CHECK(t.outcome.error.find("breaks the engine's rule") != std::string::npos);
    }
    crashed = crashed || t.outcome.status == TrialStatus::crashed;
  }
  CHECK(invalid);
  CHECK(crashed);
  CHECK(eval.calls == 40 - 1 + 4 * 2); // x = 7 never ran; the top 3 and the defaults re-measured
  int replicates = 0, baseline_measurements = 0;
  for (const auto& t : r.trials) {
    replicates += t.phase == StudyPhase::replicate ? 1 : 0;
    baseline_measurements += t.config["x"] == 5 ? 1 : 0;
  }
  CHECK(replicates == 8);
  CHECK(baseline_measurements == 3); // as often as each finalist
}

TEST_CASE("a study where nothing meets the SLO has no winner") {
  const auto s = parse_search_space("name: s\nparameters:\n  - {name: x, type: int, low: 30, high: 40}\n", "s");
  StudyOptions o;
  o.trials = 5;
  Scripted eval;
  auto random = make_random_search(s, 1);
  auto exec = make_local_executor(eval, 1, {});
  const auto r = run_study(s, *random, eval, *exec, o, {}, {});
  CHECK_FALSE(r.best.has_value());
  CHECK(r.trials.size() == 5);
}

TEST_CASE("the simulator evaluator refuses knobs it does not have, and scores Eq. 3") {
  const auto bad =
      parse_search_space("name: s\nparameters:\n  - {name: threads, type: int, low: 1, high: 4}\n", "x.yaml");
  SimEvaluatorOptions so;
  CHECK_THROWS_WITH_AS(make_sim_evaluator(bad, so), doctest::Contains("x.yaml: knob 'threads'"), InputError);
  const auto s = parse_search_space("name: s\nparameters:\n  - {name: max_num_seqs, type: int, low: 1, high: 64}\n"
                                    "  - {name: max_num_batched_tokens, type: int, low: 1, high: 64}\n",
                                    "s");
  so.setup.segment.workload.rate = 4;
  so.setup.segment.min_completions = 200;
  so.setup.segment.min_duration_s = 20;
  auto eval = make_sim_evaluator(s, so);
  CHECK(eval->invalid_reason({{"max_num_seqs", 32}, {"max_num_batched_tokens", 16}}).find("max_num_seqs") !=
        std::string::npos);
  const nlohmann::json config = {{"max_num_seqs", 16}, {"max_num_batched_tokens", 64}};
  const auto o = eval->evaluate(config, 1, {});
  const double expected = o.metrics["goodput"].get<double>() -
                          5.0 * std::max(0.0, o.metrics["p99_s"].get<double>() - o.metrics["slo_s"].get<double>()) -
                          0.01 * 16;
  CHECK(o.value == doctest::Approx(expected));
}

TEST_CASE("parallel slots run the same study's trials, and hill-climb waits for a whole step") {
  const auto s = parse_search_space(space_yaml, "s");
  StudyOptions o;
  o.trials = 20;
  o.top_k = 2;
  o.replicates = 1;
  Scripted eval;
  auto grid = make_grid_search(s, 3);
  auto exec = make_local_executor(eval, 4, {});
  const auto r = run_study(s, *grid, eval, *exec, o, {}, {});
  REQUIRE(r.trials.size() == 23); // 20, the top 2 once more, the baseline once more
  for (std::size_t i = 0; i < r.trials.size(); ++i)
    CHECK(r.trials[i].number == static_cast<int>(i)); // reported in trial order
  CHECK((*r.best)["x"] == 19);                        // trial 0 is the baseline x = 5; the grid then skips 5: 0..19

  HillClimbOptions hc;
  hc.steps["x"] = 4;
  auto climb = make_hill_climb(s, hc);
  Scripted eval2;
  auto exec2 = make_local_executor(eval2, 3, {});
  const auto h = run_study(s, *climb, eval2, *exec2, o, {}, {});
  auto climb_serial = make_hill_climb(s, hc);
  Scripted eval3;
  auto exec3 = make_local_executor(eval3, 1, {});
  const auto serial = run_study(s, *climb_serial, eval3, *exec3, o, {}, {});
  REQUIRE(h.trials.size() == serial.trials.size());
  for (std::size_t i = 0; i < h.trials.size(); ++i)
    CHECK(h.trials[i].config == serial.trials[i].config);
}

TEST_CASE("local slots share the GPUs out: each trial gets its slot's devices") {
  const auto s = parse_search_space(space_yaml, "s");
  StudyOptions o;
  o.trials = 12;
  o.top_k = 0;
  Scripted eval;
  auto random = make_random_search(s, 3);
  auto exec = make_local_executor(eval, 2, {}, {"0", "1", "2", "3"});
  (void)run_study(s, *random, eval, *exec, o, {}, {});
  CHECK(eval.gpus == std::set<std::string>{"0,1", "2,3"});
  Scripted serial;
  auto one = make_local_executor(serial, 1, {});
  auto random2 = make_random_search(s, 3);
  (void)run_study(s, *random2, serial, *one, o, {}, {});
  CHECK(serial.gpus == std::set<std::string>{""}); // no --gpus: the engine inherits the environment
}

TEST_CASE("a study's result read back from its JSON writes the same JSON; a field of the wrong type is refused by "
          "name") {
  const auto s = parse_search_space(space_yaml, "s");
  StudyOptions o;
  o.trials = 20;
  Scripted eval;
  auto grid = make_grid_search(s, 3);
  auto exec = make_local_executor(eval, 1, {});
  TuneResult r;
  r.study = run_study(s, *grid, eval, *exec, o, {}, {});
  for (auto& t : r.study.trials) // figures for the Pareto front to_json derives
    if (t.outcome.status == TrialStatus::measured)
      t.outcome.metrics.update({{"throughput", t.config["x"]}, {"p99_s", std::abs(t.config["x"].get<double>() - 20)}});
  r.space_name = "s";
  r.evaluator = "scripted";
  r.options.seed = 7;
  r.best_command = eval.launch_command(*r.study.best);
  r.resumed_from = 3;
  const nlohmann::json j = to_json(r);
  REQUIRE(j.contains("pareto_frontier"));
  const auto back = tune_result_from_json(j, "tune.json");
  CHECK(to_json(back) == j);
  CHECK(back.study.trials.size() == r.study.trials.size());
  CHECK(*back.study.best == *r.study.best);
  CHECK(back.study.best_median == r.study.best_median);

  nlohmann::json wrong = j;
  wrong["trials"][2]["number"] = "two";
  CHECK_THROWS_WITH_AS(tune_result_from_json(wrong, "tune.json"),
                       doctest::Contains("tune.json: field /trials/2/number"), InputError);
  wrong = j;
  wrong["trials"][1]["phase"] = "warmup";
  CHECK_THROWS_WITH_AS(tune_result_from_json(wrong, "tune.json"),
                       doctest::Contains("tune.json: field /trials/1/phase: 'warmup' is not a study phase"),
                       InputError);
}
