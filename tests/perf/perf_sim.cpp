// The simulator's speed and SLO-Tuner's simulator findings (seed 002 Fig. 2/4), in one run:
//   perf_sim [SETUP] [SVG_DIR]
// 1. Speed: simulated requests per second of wall time on one core, for continuous and static
//    batching, with and without speculative decoding (goal ≥ 1e5 requests/s).
// 2. Knees: batch size B under static batching at the setup's rate and at 1.6× it, and closed-
//    loop clients C against B = 8 (the paper's concurrency ablation): p99 and goodput.
// 3. Speculation: tokens per verification k at B = 8, W = 2 (0: off), at both rates.
// Figures print as tables; with SVG_DIR, batch_knee.svg, speculation.svg and
// concurrency_knee.svg are written there.
#include "core/svg_chart.hpp"
#include "sim/segment.hpp"
#include "sim/sim_config.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace optkit;
using namespace optkit::sim;

namespace {

double
seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void
speed(const SimSetup& setup, const char* label, SimKnobs knobs, double rate) {
  SegmentSpec spec = setup.segment;
  spec.workload.rate = rate;
  spec.warmup_s = 0;
  spec.min_completions = 400000;
  spec.min_duration_s = 0;
  const auto jobs = segment_jobs(spec, 1);
  const auto start = std::chrono::steady_clock::now();
  const auto served = run_open_loop(setup.timing, knobs, jobs, SimOptions{});
  const double wall = seconds_since(start);
  const auto m = measure(served, 0, jobs.back().arrival, spec.slo_s);
  std::printf("  %-44s %9zu requests in %6.3f s = %10.0f requests/s  (simulated %.0f s, p99 %.3f s)\n", label,
              jobs.size(), wall, static_cast<double>(jobs.size()) / wall, jobs.back().arrival, m.p99);
}

} // namespace

int
main(int argc, char** argv) {
  const SimSetup setup = resolve_sim_setup(argc > 1 ? argv[1] : "tinyllama-l40s");
  const std::filesystem::path svg_dir = argc > 2 ? argv[2] : "";
  std::printf("setup %s (%s), SLO p99 <= %.2f s\n\n1. simulator speed, one core\n", setup.name.c_str(),
              setup.source.c_str(), setup.segment.slo_s);
  SimKnobs continuous;
  continuous.max_num_seqs = 64;
  speed(setup, "continuous B=64, no speculation", continuous, 60);
  SimKnobs spec = continuous;
  spec.speculative_tokens = 4;
  speed(setup, "continuous B=64, k=4 W=1", spec, 40);
  SimKnobs batches;
  batches.batching = Batching::static_batches;
  batches.max_num_seqs = 16;
  speed(setup, "static B=16, no speculation", batches, 20);

  const auto sweep = [&](const char* title, auto vary, const std::vector<int>& values, double rate = 0,
                         int closed_loop = 0) {
    std::printf("\n%s\n  %6s %10s %10s %12s %10s\n", title, "value", "p50 s", "p99 s", "goodput/s", "attain");
    std::vector<std::pair<double, double>> p99s, goodputs;
    for (int v : values) {
      SimKnobs k;
      SegmentSpec s = setup.segment;
      if (rate > 0)
        s.workload.rate = rate;
      if (closed_loop > 0) {
        s.workload.arrivals = ArrivalKind::closed_loop;
        s.workload.concurrency = v;
      }
      vary(k, v);
      const auto m = run_segment(setup.timing, k, s, 7);
      std::printf("  %6d %10.3f %10.3f %12.2f %10.3f\n", v, m.p50, m.p99, m.goodput, m.attainment);
      p99s.emplace_back(v, m.p99);
      goodputs.emplace_back(v, m.goodput);
    }
    return std::make_pair(p99s, goodputs);
  };
  const std::vector<int> bs{1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
  const auto static_batch = [](SimKnobs& k, int b) {
    k.batching = Batching::static_batches;
    k.max_num_seqs = b;
  };
  const double heavy = setup.segment.workload.rate * 1.6;
  const auto knee = sweep("2. batch size B, static batching, no speculation, the setup's rate", static_batch, bs);
  const auto knee_heavy =
      sweep(fmt::format("   the same at {:.1f} requests/s", heavy).c_str(), static_batch, bs, heavy);
  const std::vector<int> cs{1, 2, 4, 6, 8, 10, 12, 14, 16};
  const auto concurrency = sweep(
      "   closed-loop clients C against continuous batching with B = 8 (the queueing knee)",
      [](SimKnobs& k, int) { k.max_num_seqs = 8; }, cs, 0, 1);
  const std::vector<int> ks{0, 1, 2, 4, 6, 8, 12, 16};
  const auto cadence_cont = sweep(
      "3. speculative tokens k, continuous batching B = 8, W = 2 (0: off)",
      [](SimKnobs& k, int v) {
        k.max_num_seqs = 8;
        k.draft_width = 2;
        k.speculative_tokens = v;
      },
      ks);
  const auto cadence_heavy = sweep(
      fmt::format("   the same at {:.1f} requests/s", heavy).c_str(),
      [](SimKnobs& k, int v) {
        k.max_num_seqs = 8;
        k.draft_width = 2;
        k.speculative_tokens = v;
      },
      ks, heavy);
  if (!svg_dir.empty()) {
    std::filesystem::create_directories(svg_dir);
    Chart knee_chart{"p99 vs batch size (static batching)", "max batch B", "p99 end-to-end latency (s)", {}, {}, {}};
    knee_chart.series.push_back({"setup's rate", "#1f77b4", knee.first, true, true, false});
    knee_chart.series.push_back({"1.6x the rate", "#ff7f0e", knee_heavy.first, true, true, false});
    knee_chart.horizontal.push_back({setup.segment.slo_s, "SLO"});
    std::ofstream(svg_dir / "batch_knee.svg") << render_svg(knee_chart);
    Chart spec_chart{"p99 vs speculative tokens (continuous, B=8, W=2)",
                     "speculative tokens k",
                     "p99 end-to-end latency (s)",
                     {},
                     {},
                     {}};
    spec_chart.series.push_back({"setup's rate", "#1f77b4", cadence_cont.first, true, true, false});
    spec_chart.series.push_back({"1.6x the rate", "#ff7f0e", cadence_heavy.first, true, true, false});
    spec_chart.horizontal.push_back({setup.segment.slo_s, "SLO"});
    std::ofstream(svg_dir / "speculation.svg") << render_svg(spec_chart);
    Chart conc_chart{
        "goodput vs closed-loop clients (continuous, B=8)", "clients C", "goodput (requests/s)", {}, {}, {}};
    conc_chart.series.push_back({"goodput", "#2ca02c", concurrency.second, true, true, false});
    std::ofstream(svg_dir / "concurrency_knee.svg") << render_svg(conc_chart);
    std::printf("\nplots: batch_knee.svg, speculation.svg, concurrency_knee.svg in %s\n", svg_dir.c_str());
  }
  return 0;
}
