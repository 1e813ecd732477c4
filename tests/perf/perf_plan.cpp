// Benchmark for `optkit plan`: configuration evaluations per second on one core, for the default
// search (Llama-3.1-70B on 8 x h200_sxm, ISL 4000 / OSL 500) and for an MoE model, with the
// speed-of-light fallback only and with a perf database covering the model's shapes (synthesised
// here from the roofline at random efficiencies — lookups cost the same as for measured data).
// Compared with AIConfigurator's published median of 1.5 ms per configuration (seed Table 1).
// Then percentile SLAs (plan --slo): the rows meeting the mean bounds served on the simulator,
// each row ~10 evaluations of 2,000 Poisson requests, with the threads plan uses.
// Prints figures; asserts nothing.
#include "core/resource_paths.hpp"
#include "plan/percentile_selection.hpp"
#include "plan/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

using namespace optkit;
using namespace optkit::perf;
using namespace optkit::plan;

namespace {

struct Timing {
  double seconds = 0; // median of the repeats
  std::size_t evaluations = 0;
  std::string best;
};

Timing
time_search(const PlanRequest& request, const SystemSpec& system, const PerfDatabase& db, int repeats) {
  std::vector<double> seconds;
  Timing timing;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const PlanResult result = search(request, system, db);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    timing.evaluations = result.evaluations;
    timing.best = result.best ? describe(result.rows[*result.best], request.model.is_moe()) : "none";
  }
  std::sort(seconds.begin(), seconds.end());
  timing.seconds = seconds[seconds.size() / 2];
  return timing;
}

// A database with points at every GEMM shape and attention head layout the search will ask for.
PerfDatabase
synthetic_database(const PlanRequest& request, const SystemSpec& system) {
  PerfDatabase db(system);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> efficiency(0.3, 0.8);
  const ModelArch& m = request.model;
  const double bw = system.memory_bandwidth_gbs * 1e9;
  const std::vector<double> ms = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  for (int tp : {1, 2, 4, 8}) {
    const double kv_local = std::max(1, m.kv_heads / tp);
    const std::vector<std::pair<double, double>> shapes = {{(m.heads / tp + 2 * kv_local) * m.head_dim, m.hidden},
                                                           {m.hidden, double(m.heads) / tp * m.head_dim},
                                                           {2.0 * m.intermediate / tp, m.hidden},
                                                           {m.hidden, double(m.intermediate) / tp},
                                                           {double(m.vocab) / tp, m.hidden}};
    for (const auto& [n, k] : shapes)
      for (double mm : ms) {
        const double sol = speed_of_light_us(gemm_cost(mm, n, k, 2, 2), system.peak_flops("bf16"), bw);
        db.add_point("gemm", {"bf16", std::to_string(long(n)), std::to_string(long(k))}, mm, 0, sol / efficiency(rng));
      }
    for (double batch : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512})
      for (double kv : {1024.0, 2048.0, 4096.0, 8192.0}) {
        const double sol = speed_of_light_us(
            attention_decode_cost(batch, kv, m.heads / tp, m.head_dim, m.head_dim, 2 * kv_local * m.head_dim, 2),
            system.peak_flops("bf16"), bw);
        db.add_point("attention_decode",
                     {"bf16", std::to_string(m.heads / tp), std::to_string(int(kv_local)), std::to_string(m.head_dim)},
                     batch, kv, sol / efficiency(rng));
      }
  }
  db.finish();
  return db;
}

void
report(const char* label, const Timing& t) {
  const double per_second = double(t.evaluations) / t.seconds;
  fmt::print("{:<44} {:>7} configs  {:>8.2f} ms  {:>10.0f} evaluations/s  {:>6.2f} us/config  ({:.0f}x AIC's 1.5 ms)\n",
             label, t.evaluations, t.seconds * 1e3, per_second, 1e6 / per_second, 1.5e-3 * per_second);
}

// plan --slo on top of a search: the simulated rows, their evaluations and the wall time.
void
report_percentiles(const char* label, PlanRequest request, const SystemSpec& system, const PerfDatabase& db,
                   const std::vector<std::string>& slos) {
  TailOptions options;
  options.slos = plan_slos(slos);
  request.ttft_limit_ms = request.tpot_limit_ms = 1e30;
  for (const auto& rule : options.slos) // the mean bounds plan takes from the SLOs
    if (rule.metric == bench::LatencyMetric::ttft)
      request.ttft_limit_ms = rule.threshold_s * 1000;
    else if (rule.metric == bench::LatencyMetric::e2e)
      request.request_latency_limit_ms = rule.threshold_s * 1000;
  PlanResult result = search(request, system, db);
  const auto start = std::chrono::steady_clock::now();
  const auto tails = judge_percentile_slas(request, system, db, result, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{:<44} {:>3} rows simulated in {:7.3f} s ({:.1f} ms a row); best {} at {:.3g} req/s\n", label,
             tails.size(), seconds, seconds * 1e3 / double(std::max<std::size_t>(tails.size(), 1)),
             tails.empty() ? std::string("none") : describe(result.rows[tails.front().row], request.model.is_moe()),
             tails.empty() ? 0.0 : tails.front().at_capacity.rate);
}

} // namespace

int
main() {
  const auto data = find_data_directory();
  const SystemSpec h200 = load_system(data.path / "profiles", "h200_sxm");
  PlanRequest dense;
  dense.model = resolve_model("llama-3.1-70b");
  dense.gpus = 8;
  dense.workload = {4000, 500, 0};
  dense.ttft_limit_ms = 1200;
  dense.tpot_limit_ms = 20;
  const PerfDatabase roofline_only(h200);
  const Timing dense_roofline = time_search(dense, h200, roofline_only, 21);
  report("llama-3.1-70b 8xh200 agg+disagg, roofline", dense_roofline);
  const PerfDatabase db = synthetic_database(dense, h200);
  const Timing dense_db = time_search(dense, h200, db, 21);
  report(fmt::format("llama-3.1-70b 8xh200 agg+disagg, perf db ({} pts)", db.points()).c_str(), dense_db);
  fmt::print("  perf-db lookups cost {:.2f}x the roofline path; best: {}\n", dense_db.seconds / dense_roofline.seconds,
             dense_db.best);

  PlanRequest all_modes = dense;
  all_modes.modes = {ServingMode::static_batching, ServingMode::aggregated, ServingMode::disaggregated};
  report("llama-3.1-70b 8xh200 static+agg+disagg, roofline", time_search(all_modes, h200, roofline_only, 11));

  PlanRequest moe = dense;
  moe.model = resolve_model("qwen3-235b-a22b");
  report("qwen3-235b-a22b 8xh200 agg+disagg, roofline", time_search(moe, h200, roofline_only, 11));
  PlanRequest deepseek = dense;
  deepseek.model = resolve_model("deepseek-v3");
  deepseek.precision = {Precision::fp8, Precision::fp8, Precision::bf16};
  deepseek.gpus = 16;
  report("deepseek-v3 fp8 16xh200 agg+disagg, roofline", time_search(deepseek, h200, roofline_only, 5));

  report_percentiles("--slo llama-3.1-70b 8xh200, perf db", dense, h200, db, {"e2e:p95<=12s", "ttft:p95<=1500ms"});
  report_percentiles("--slo deepseek-v3 fp8 16xh200, roofline", deepseek, h200, roofline_only,
                     {"e2e:p95<=60s", "ttft:p99<=5s"});
  return 0;
}
