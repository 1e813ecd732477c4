#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "hetero/bitwidth_transfer.hpp"
#include "hetero/cluster_spec.hpp"
#include "hetero/hetero_planner.hpp"
#include "hetero/ilp_solver.hpp"
#include "hetero/layer_costs.hpp"
#include "hetero/pipeline_problem.hpp"
#include "hetero/variance_indicator.hpp"
#include "perf/model_arch.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace optkit;
using namespace optkit::hetero;

namespace {

// A random small problem: stages of different speeds and sizes, bit options 4/8/16.
PipelineProblem
random_problem(std::mt19937& rng, int units, int stages) {
  std::uniform_real_distribution<double> u01(0, 1);
  PipelineProblem p;
  p.bits = {4, 8, 16};
  p.prefill_micro_batches = 1 + std::floor(u01(rng) * 4);
  p.decode_micro_batches = 1 + std::floor(u01(rng) * 4);
  p.decode_rounds = 10;
  p.theta = 0.05 + u01(rng) * 0.5;
  for (int u = 0; u < units; ++u) {
    p.unit_bytes.push_back({1.0, 2.0, 4.0});
    const double sensitivity = 0.5 + u01(rng);
    p.omega.push_back({0.2 * sensitivity, 0.05 * sensitivity, 0.0});
  }
  for (int j = 0; j < stages; ++j) {
    StageCosts s;
    const double speed = 0.5 + u01(rng);
    s.prefill_s = {0.010 * speed, 0.011 * speed, 0.012 * speed};
    s.decode_s = {0.001 * speed, 0.0015 * speed, 0.0025 * speed};
    s.fixed_prefill_s = j == 0 ? 0.002 : 0;
    s.fixed_decode_s = j == 0 ? 0.0002 : 0;
    s.transfer_prefill_s = 0.001 * u01(rng);
    s.transfer_decode_s = 0.0001 * u01(rng);
    s.capacity_bytes = 2.0 + std::floor(u01(rng) * 8);
    p.stages.push_back(s);
  }
  return p;
}

// Every contiguous partition × every bit assignment: the exact optimum.
double
brute_force(const PipelineProblem& p) {
  const int units = p.units();
  double best = std::numeric_limits<double>::infinity();
  Assignment a;
  a.stage.assign(std::size_t(units), 0);
  a.bit.assign(std::size_t(units), 0);
  std::function<void(int)> bits = [&](int u) {
    if (u == units) {
      const auto e = evaluate(p, a);
      if (e.feasible)
        best = std::min(best, e.objective);
      return;
    }
    for (int b = 0; b < int(p.bits.size()); ++b) {
      a.bit[std::size_t(u)] = b;
      bits(u + 1);
    }
  };
  std::function<void(int, int)> stages = [&](int u, int j) {
    if (u == units) {
      if (j == p.stage_count() - 1)
        bits(0);
      return;
    }
    for (int next = j; next <= std::min(j + 1, p.stage_count() - 1); ++next) {
      if (u == 0 && next != 0)
        continue;
      a.stage[std::size_t(u)] = next;
      stages(u + 1, next);
    }
  };
  stages(0, 0);
  return best;
}

} // namespace

TEST_CASE("a plan's latency is the pipeline formula; broken plans are refused with the reason") {
  PipelineProblem p;
  p.bits = {4, 16};
  p.unit_bytes = {{1, 2}, {1, 2}, {1, 2}};
  p.omega = {{0.5, 0}, {0.25, 0}, {0.25, 0}};
  p.prefill_micro_batches = 2;
  p.decode_micro_batches = 3;
  p.decode_rounds = 4;
  p.theta = 2;
  StageCosts a{{1, 2}, {0.1, 0.2}, 0.5, 0.05, 0, 0, 4};
  StageCosts b{{3, 6}, {0.3, 0.6}, 0, 0, 10, 0, 2};
  p.stages = {a, b};
  const auto e = evaluate(p, {{0, 0, 1}, {1, 0, 0}});
  REQUIRE(e.feasible);
  // Stage 0: units 0 (16-bit) and 1 (4-bit) → prefill 2 + 1 + 0.5, decode 0.2 + 0.1 + 0.05.
  // Stage 1: unit 2 (4-bit) → prefill 3 (its 10 s hand-off bounds the max), decode 0.3.
  CHECK(e.stage_prefill_s[0] == doctest::Approx(3.5));
  CHECK(e.stage_decode_s[0] == doctest::Approx(0.35));
  const double latency = (3.5 + 3) + (2 - 1) * 10 + 4 * ((0.35 + 0.3) + (3 - 1) * 0.35);
  CHECK(e.latency_s == doctest::Approx(latency));
  CHECK(e.indicator == doctest::Approx(0.5));
  CHECK(e.objective == doctest::Approx(latency + 2 * 0.5));

  CHECK_FALSE(evaluate(p, {{0, 1, 0}, {0, 0, 0}}).feasible); // not contiguous
  CHECK(evaluate(p, {{0, 1, 0}, {0, 0, 0}}).why.find("contiguous") != std::string::npos);
  CHECK_FALSE(evaluate(p, {{0, 0, 0}, {0, 0, 0}}).feasible);                          // stage 1 unused
  CHECK(evaluate(p, {{0, 1, 1}, {1, 1, 1}}).why.find("memory") != std::string::npos); // stage 1: 2 + 2 > 2
}

TEST_CASE("the ILP finds the exact optimum of small problems (brute force as the oracle)") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 12; ++trial) {
    const int units = 4 + trial % 3;
    const int stages = 2 + trial % 2;
    const auto p = random_problem(rng, units, stages);
    const double optimum = brute_force(p);
    IlpOptions options;
    options.time_limit_s = 30;
    options.relative_gap = 0; // proven exactly, not within the default 1e-4
    const auto r = solve_ilp(p, options);
    if (!std::isfinite(optimum)) {
      CHECK_FALSE(r.assignment.has_value());
      continue;
    }
    REQUIRE(r.assignment.has_value());
    CHECK(r.proven_optimal);
    const auto e = evaluate(p, *r.assignment);
    INFO("trial ", trial, ": ", e.why);
    REQUIRE(e.feasible);
    CHECK(e.objective == doctest::Approx(optimum).epsilon(1e-6));
    CHECK(r.objective == doctest::Approx(e.objective).epsilon(1e-6)); // the ILP states what the checker computes

    // The heuristic: feasible, never better than the optimum, never worse than its start.
    if (const auto start = greedy_start(p)) {
      const double from = evaluate(p, *start).objective;
      const auto h = evaluate(p, bitwidth_transfer(p, *start));
      REQUIRE(h.feasible);
      CHECK(h.objective >= optimum - 1e-9);
      CHECK(h.objective <= from + 1e-12);
    }
  }
}

TEST_CASE("accuracy only (adabits): the least indicator that fits, whatever the latency") {
  std::mt19937 rng(11);
  auto p = random_problem(rng, 5, 2);
  p.stages[0].capacity_bytes = 100;
  p.stages[1].capacity_bytes = 100;
  IlpOptions options;
  options.accuracy_only = true;
  const auto r = solve_ilp(p, options);
  REQUIRE(r.assignment.has_value());
  CHECK(evaluate(p, *r.assignment).indicator == doctest::Approx(0.0)); // room for every layer at 16 bits
}

TEST_CASE("the variance indicator follows Proposition 1 and is normalised at the lowest bitwidth") {
  const std::vector<std::vector<LinearStatistics>> layers = {{{"q", 4, 1.0, 2.0}}, {{"q", 4, 3.0, 1.0}}};
  const auto omega = variance_indicator(layers, {3, 4, 16});
  // ω ∝ D·(max|W| / (2^(b−1) − 1))²·Var/4: layer 1 is (3²·1)/(1²·2) = 4.5× layer 0's.
  CHECK(omega[1][0] / omega[0][0] == doctest::Approx(4.5));
  CHECK(omega[0][0] / omega[0][1] == doctest::Approx((7.0 / 3.0) * (7.0 / 3.0))); // 3 vs 4 bits
  CHECK(omega[0][0] + omega[1][0] == doctest::Approx(1.0));
  CHECK(omega[0][2] == 0.0); // 16 bits: not quantized
}

TEST_CASE("cluster files: groups and links parsed; mistakes name the file and place") {
  const auto profiles = find_data_directory().path / "profiles";
  const auto c = parse_cluster("groups:\n  - {gpu: a100_40g, count: 2, node: a}\n  - {gpu: v100, count: 1}\n"
                               "links:\n  inter_node: {bandwidth_gbs: 25, latency_us: 5}\n",
                               "c.yaml", profiles);
  CHECK(c.devices() == 3);
  CHECK(c.groups[1].node == "node1");
  CHECK(c.link(c.groups[0], c.groups[1]).bandwidth_gbs == 25);
  CHECK(c.link(c.groups[0], c.groups[0]).bandwidth_gbs == c.groups[0].system.intra_node_bandwidth_gbs);
  CHECK_THROWS_WITH_AS(parse_cluster("groups:\n  - {gpu: a100_40g, cont: 2}\n", "c.yaml", profiles),
                       doctest::Contains("c.yaml:2:"), InputError);
  CHECK_THROWS_WITH_AS(parse_cluster("groups:\n  - {gpu: a100, count: 2}\n", "c.yaml", profiles),
                       doctest::Contains("groups[0].gpu"), InputError);
  CHECK_THROWS_WITH_AS(parse_cluster("groups:\n  - {gpu: v100, count: 1.5}\n", "c.yaml", profiles),
                       doctest::Contains("whole number"), InputError);
}

TEST_CASE("Llama-3.1-70B over 2×A100-40G + 2×V100-32G: a feasible mixed-precision plan; one T4 is too small") {
  const auto profiles = find_data_directory().path / "profiles";
  const auto cluster = load_cluster(profiles / "clusters" / "a100-40g-x2-v100-x2.yaml", profiles);
  const auto model = perf::resolve_model("llama-3.1-70b");
  std::map<std::string, std::unique_ptr<perf::PerfDatabase>> owned;
  std::map<std::string, const perf::PerfDatabase*> dbs;
  for (const auto& g : cluster.groups) {
    owned[g.gpu] = std::make_unique<perf::PerfDatabase>(g.system);
    dbs[g.gpu] = owned[g.gpu].get();
  }
  const LayerCosts costs(model, cluster, dbs, {512, 128, 32});
  const std::vector<int> bits = {3, 4, 8, 16};
  const auto omega = variance_indicator(shape_only_statistics(model), bits);
  HeteroOptions options;
  options.time_limit_s = 5;
  const auto plan = plan_hetero(costs, cluster, omega, options);
  // Every GPU in one stage or another (stages may now be tensor-parallel groups of one GPU type).
  int gpus = 0;
  for (const auto& stage : plan.stages)
    gpus += stage.tp;
  CHECK(gpus == 4);
  REQUIRE(plan.stages.size() >= 2); // two GPU types: at least two stages
  CHECK(plan.layer_bits.size() == 80);
  CHECK(plan.stages.front().first_layer == 0);
  CHECK(plan.stages.back().end_layer == 80);
  for (std::size_t j = 0; j < plan.stages.size(); ++j) {
    CHECK(plan.stages[j].memory_bytes <= plan.stages[j].capacity_bytes);
    if (j > 0)
      CHECK(plan.stages[j].first_layer == plan.stages[j - 1].end_layer);
  }
  CHECK(plan.latency_s > 0);
  CHECK(plan.objective <= plan.heuristic_objective + 1e-9); // the ILP only ever improves on the heuristic
  // 70B at 16 bits (≈ 131 GiB of weights) cannot fit in ≈ 129 GiB: some layers must be lower.
  CHECK(std::any_of(plan.layer_bits.begin(), plan.layer_bits.end(), [](int b) { return b < 16; }));

  const auto small = parse_cluster("groups:\n  - {gpu: t4, count: 1}\n", "t4.yaml", profiles);
  std::map<std::string, std::unique_ptr<perf::PerfDatabase>> owned_t4;
  owned_t4["t4"] = std::make_unique<perf::PerfDatabase>(small.groups[0].system);
  const LayerCosts t4_costs(model, small, {{"t4", owned_t4["t4"].get()}}, {512, 128, 32});
  CHECK_THROWS_WITH_AS(plan_hetero(t4_costs, small, omega, options), doctest::Contains("GiB missing"), GoalNotMet);
}
