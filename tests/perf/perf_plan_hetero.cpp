// Benchmark for `optkit plan hetero` against the goals: Llama-3.1-70B with bits
// {3, 4, 8, 16} over SplitQuant's 2×A100-40G + 2×V100 cluster, its homogeneous 4×V100 and
// 4×A100-40G clusters (with the uniform baselines beside the plan), and over four device groups
// (A100-40G, V100, 2×T4, L4), ISL 512 / OSL 128 / batch 32. For each, the full planner (bitwidth
// transfer, then the CBC ILP on the best candidates) and the heuristic alone, side by side: wall
// seconds, whether the ILP proved optimality (else its gap), and the heuristic's objective as a
// ratio of the ILP's. Goals: ILP proven optimal or within 2 % in ≤ 10 s; heuristic within 5 % of
// the ILP in ≤ 1 s. Then the indicators' costs from real weights and activations (SplitQuant's
// Table V point; goal: the variance indicator ≥ 50× cheaper than the Hessian's), on the tiny
// model and on two layers of Llama-3.2-1B's shapes. Prints figures; asserts nothing.
#include "hetero/hetero_run.hpp"
#include "hetero/layer_statistics.hpp"
#include "model/random_model.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

using namespace optkit;
using namespace optkit::hetero;

namespace {

struct Timed {
  HeteroRun run;
  double seconds = 0;
};

Timed
time_plan(const std::string& cluster, const std::string& solver) {
  HeteroRunOptions options;
  options.cluster = cluster;
  options.model = "llama-3.1-70b";
  options.workload = {.isl = 512, .osl = 128, .batch = 32};
  options.planner.bits = {3, 4, 8, 16};
  options.planner.time_limit_s = 10;
  options.solver = solver;
  const auto started = std::chrono::steady_clock::now();
  Timed t{.run = run_hetero(options, {})};
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return t;
}

void
report(const std::string& label, const std::string& cluster) {
  const Timed ilp = time_plan(cluster, "ilp");
  const Timed heuristic = time_plan(cluster, "heuristic");
  const HeteroPlan& p = ilp.run.plan;
  fmt::print("{}\n", label);
  fmt::print("  ilp        {:7.3f} s total ({:.3f} s heuristic + adabits starts, {:.3f} s in CBC, {} solves, "
             "{} candidates)  objective {:.4f}  {}\n",
             ilp.seconds, p.heuristic_seconds, p.ilp_seconds, p.ilp_solves, p.candidates, p.objective,
             p.proven_optimal ? "proven optimal" : fmt::format("gap {:.2f} %", 100 * p.gap));
  fmt::print("  heuristic  {:7.3f} s total ({:.3f} s planning)                objective {:.4f}  "
             "= {:.4f} x the ILP's\n",
             heuristic.seconds, heuristic.run.plan.heuristic_seconds, heuristic.run.plan.objective,
             heuristic.run.plan.objective / p.objective);
  fmt::print("  plan: {} stages [{}], {:.2f} s per batch, {:.0f} tokens/s, method {}\n", p.stages.size(),
             layout_of_plan(p), p.latency_s, p.throughput_tokens_per_s, p.method);
  for (const auto& b : ilp.run.baselines)
    if (b.fits)
      fmt::print("  uniform {:>2}-bit {:<5} {:<40} {:6.0f} tokens/s = {:.2f} x the plan\n", b.bits,
                 topology_name(b.topology), b.layout, b.throughput_tokens_per_s,
                 b.throughput_tokens_per_s / p.throughput_tokens_per_s);
}

// The indicators' costs (SplitQuant's Table V point): the variance indicator's statistics against
// the Hessian indicator's (Σ XᵀX, power iteration, quantization errors), beside the calibration
// pass both need, on `model_dir` over `samples` sequences of `length` random tokens.
void
report_indicator_costs(const std::string& label, const std::filesystem::path& model_dir, std::int64_t vocab,
                       int samples, int length) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(vocab) - 1);
  std::vector<std::vector<std::int32_t>> calibration(static_cast<std::size_t>(samples),
                                                     std::vector<std::int32_t>(static_cast<std::size_t>(length)));
  for (auto& s : calibration)
    for (auto& t : s)
      t = token(rng);
  const auto m = measure_layer_statistics(model_dir, calibration, {.bits = {3, 4, 8, 16}, .hessian = true});
  fmt::print("{} ({} calibration tokens)\n", label, m.tokens);
  fmt::print("  calibration pass {:8.3f} s   variance indicator {:8.4f} s   Hessian indicator {:8.3f} s   "
             "Hessian / variance = {:.0f}x\n",
             m.forward_seconds, m.variance_seconds, m.hessian_seconds, m.hessian_seconds / m.variance_seconds);
}

} // namespace

int
main() {
  report("Llama-3.1-70B on 2x A100-40G + 2x V100 (bundled a100-40g-x2-v100-x2)", "a100-40g-x2-v100-x2");
  // SplitQuant's homogeneous clusters 9 and 10 (Table IV measured TP4 and TP2+PP2 best).
  report("Llama-3.1-70B on 4x V100 (bundled v100-x4, SplitQuant's cluster 9)", "v100-x4");
  report("Llama-3.1-70B on 4x A100-40G (bundled a100-40g-x4, SplitQuant's cluster 10)", "a100-40g-x4");

  const auto file = std::filesystem::temp_directory_path() / "optkit-perf-hetero-4groups.yaml";
  std::ofstream(file) << "name: a100-v100-t4x2-l4\n"
                         "groups:\n"
                         "  - {gpu: a100_40g, count: 1, node: n0}\n"
                         "  - {gpu: v100, count: 1, node: n1}\n"
                         "  - {gpu: t4, count: 2, node: n2}\n"
                         "  - {gpu: l4, count: 1, node: n3}\n";
  report("Llama-3.1-70B on four groups: A100-40G, V100, 2x T4, L4 (one node each)", file.string());
  std::filesystem::remove(file);

  report_indicator_costs("Indicators on tiny-base (4 layers, hidden 192)",
                         OPTKIT_SOURCE_DIR "/testdata/models/tiny-base", 2048, 16, 128);
  // Llama-3.2-1B's layer shapes (hidden 2048, MLP 8192), two layers of random BF16 weights.
  const auto one_b = std::filesystem::temp_directory_path() / "optkit-perf-hetero-1b-2layers";
  auto config = model::preset_model_config("llama-3.2-1b");
  config["num_hidden_layers"] = 2;
  model::write_random_model(one_b, config, model::DType::bf16, 1);
  report_indicator_costs("Indicators on Llama-3.2-1B shapes, 2 layers", one_b, config["vocab_size"].get<std::int64_t>(),
                         4, 128);
  std::filesystem::remove_all(one_b);
  return 0;
}
