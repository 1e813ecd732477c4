// plan hetero's tensor-parallel stages (SplitQuant's runtime runs "each pipeline stage spanning
// one or multiple (TP) dedicated GPUs"): the layouts searched, what a TP stage costs and holds,
// the topology chosen on SplitQuant's homogeneous clusters, and the uniform baselines of Table IV.
#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "hetero/hetero_planner.hpp"
#include "hetero/layer_costs.hpp"
#include "hetero/stage_layouts.hpp"
#include "hetero/uniform_baselines.hpp"
#include "hetero/variance_indicator.hpp"
#include "perf/model_arch.hpp"

#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <set>

using namespace optkit;
using namespace optkit::hetero;

namespace {

// A cluster with roofline-only perf databases (every figure derivable from the system files).
struct Setup {
  ClusterSpec cluster;
  perf::ModelArch model;
  std::map<std::string, std::unique_ptr<perf::PerfDatabase>> owned;
  std::map<std::string, const perf::PerfDatabase*> databases;
  std::unique_ptr<LayerCosts> costs;

  Setup(const std::string& yaml, const std::string& model_name, HeteroWorkload workload = {512, 128, 32}) {
    const auto profiles = find_data_directory().path / "profiles";
    cluster = parse_cluster(yaml, "test.yaml", profiles);
    model = perf::resolve_model(model_name);
    for (const auto& g : cluster.groups) {
      owned[g.gpu] = std::make_unique<perf::PerfDatabase>(g.system);
      databases[g.gpu] = owned[g.gpu].get();
    }
    costs = std::make_unique<LayerCosts>(model, cluster, databases, workload);
  }
};

std::set<std::string>
layout_texts(const Setup& s) {
  std::set<std::string> texts;
  for (const auto& layout : stage_layouts(*s.costs, s.cluster, 80))
    texts.insert(layout_text(s.cluster, layout));
  return texts;
}

} // namespace

TEST_CASE("the layouts: every order of the groups × every split of each group into TP stages") {
  const Setup four("groups:\n  - {gpu: a100_40g, count: 4}\n", "llama-3.1-70b");
  CHECK(four.costs->tensor_parallel_degrees(four.cluster.groups[0]) == std::vector<int>{1, 2, 4});
  CHECK(layout_texts(four) ==
        std::set<std::string>{"TP4", "TP2+PP2", "a100_40g TP2 | a100_40g TP1 | a100_40g TP1", "PP4"});

  const Setup mixed("groups:\n  - {gpu: a100_40g, count: 2, node: a}\n  - {gpu: v100, count: 2, node: b}\n",
                    "llama-3.1-70b");
  const auto layouts = stage_layouts(*mixed.costs, mixed.cluster, 80);
  CHECK(layouts.size() == 8); // 2 orders × 2 splits × 2 splits
  for (const auto& layout : layouts) {
    int gpus = 0;
    for (const auto& slot : layout)
      gpus += slot.tp;
    CHECK(gpus == 4);
  }
  CHECK(fewest_stages(*mixed.costs, mixed.cluster) == 2);
  // At most as many stages as the model has units.
  CHECK(stage_layouts(*four.costs, four.cluster, 2).size() == 2); // TP4, TP2+PP2

  // A degree must divide the model's KV heads: Llama-3.1-8B has 8, so 16 GPUs split at most 8 ways;
  // and the group's GPUs (3 T4s: 2+1 or 1+1+1).
  const Setup t4("groups:\n  - {gpu: t4, count: 3}\n", "llama-3.1-8b");
  CHECK(layout_texts(t4) == std::set<std::string>{"t4 TP2 | t4 TP1", "PP3"});
}

TEST_CASE("a TP stage: 1/k of each layer per GPU, its all-reduces in its time, k GPUs' room") {
  const Setup s("groups:\n  - {gpu: a100_40g, count: 4}\n", "llama-3.1-70b");
  const auto& group = s.cluster.groups[0];
  // Decode of a 70B layer reads its weights: split 4 ways it is faster, though not 4× (the
  // all-reduces and launches stay).
  const double tp1 = s.costs->decode_layer(group, 16, 8, 1).us;
  const double tp4 = s.costs->decode_layer(group, 16, 8, 4).us;
  CHECK(tp4 < tp1 / 2);
  CHECK(tp4 > tp1 / 4);
  const std::vector<std::vector<double>> omega(80, std::vector<double>(1, 0.0));
  const auto one = build_problem(*s.costs, s.cluster, omega, {16}, 0, {{0, 4}}, 2, 1, 32);
  const auto four = build_problem(*s.costs, s.cluster, omega, {16}, 0, {{0, 1}, {0, 1}, {0, 1}, {0, 1}}, 2, 1, 8);
  // The TP4 stage holds what four TP1 stages hold together (the embeddings once, on the first).
  double pp_capacity = 0;
  for (const auto& stage : four.stages)
    pp_capacity += stage.capacity_bytes;
  CHECK(one.stages[0].capacity_bytes == doctest::Approx(pp_capacity));
  // A unit (here 2 layers) costs its layers at TP 4 with the whole batch as one micro-batch.
  CHECK(one.stages[0].decode_s[0] == doctest::Approx(2 * s.costs->decode_layer(group, 16, 32, 4).us * 1e-6));
}

TEST_CASE("on SplitQuant's 4×V100 (cluster 9) the plan is one TP4 stage, as Table IV measured best") {
  const auto profiles = find_data_directory().path / "profiles";
  const auto cluster = load_cluster(profiles / "clusters" / "v100-x4.yaml", profiles);
  const auto model = perf::resolve_model("llama-3.1-70b");
  const perf::PerfDatabase db(cluster.groups[0].system);
  const LayerCosts costs(model, cluster, {{"v100", &db}}, {512, 128, 32});
  const std::vector<int> bits = {3, 4, 8, 16};
  const auto omega = variance_indicator(shape_only_statistics(model), bits);
  HeteroOptions options;
  options.time_limit_s = 5;
  const auto plan = plan_hetero(costs, cluster, omega, options);
  REQUIRE(plan.stages.size() == 1);
  CHECK(plan.stages[0].tp == 4);
  CHECK(plan.stages[0].memory_bytes <= plan.stages[0].capacity_bytes);
  // The ILP only ever improves on the heuristic (whether it proves optimality within its wall-clock
  // budget depends on the machine's load, so it is not asserted here).
  CHECK(plan.objective <= plan.heuristic_objective + 1e-9);
  CHECK(plan.decode_micro_batch == 32); // one stage: the whole batch at once

  // Table IV's uniform rows: FP16 does not fit 4 × 32 GB; at 3 bits every class fits, TP4 first.
  const auto baselines = uniform_baselines(costs, cluster, plan.group_size, bits, omega, 0, {});
  REQUIRE(baselines.size() == 6);
  for (int i = 0; i < 3; ++i)
    CHECK_FALSE(baselines[std::size_t(i)].fits);
  CHECK(baselines[3].layout == "PP4");
  CHECK(baselines[4].layout == "TP4");
  CHECK(baselines[5].layout == "TP2+PP2");
  CHECK(baselines[4].throughput_tokens_per_s > baselines[5].throughput_tokens_per_s);
  CHECK(baselines[5].throughput_tokens_per_s > baselines[3].throughput_tokens_per_s);
  CHECK(baselines[3].indicator == doctest::Approx(1.0)); // every layer at the lowest width
}

TEST_CASE("two GPU types have no single-stage (TP-only) layout") {
  const Setup s("groups:\n  - {gpu: a100_40g, count: 2, node: a}\n  - {gpu: v100, count: 2, node: b}\n",
                "llama-3.1-70b");
  const std::vector<int> bits = {4, 16};
  const auto omega = variance_indicator(shape_only_statistics(s.model), bits);
  const auto baselines = uniform_baselines(*s.costs, s.cluster, 2, bits, omega, 0, {});
  REQUIRE(baselines.size() == 6);
  CHECK_FALSE(baselines[4].fits); // TP at 4 bits
  CHECK(baselines[3].fits);       // PP at 4 bits
  CHECK(baselines[5].fits);       // TP+PP at 4 bits
  CHECK(baselines[5].layout.find("TP2") != std::string::npos);
}
