// The serving-mode estimators, memory feasibility and the search, on the roofline path where
// every figure can be derived by hand.
#include "core/error.hpp"
#include "plan/estimators.hpp"
#include "plan/launch_generator.hpp"
#include "plan/search.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit;
using namespace optkit::perf;
using namespace optkit::plan;

namespace {} // namespace

TEST_CASE("every bundled system loads, and an unknown one lists them") {
  const auto names = list_systems(test::profiles_dir());
  CHECK(names.size() == 10);
  for (const auto& name : names) {
    CAPTURE(name);
    const SystemSpec s = load_system(test::profiles_dir(), name);
    CHECK(s.memory_gib > 0);
    CHECK(s.peak_flops("bf16") > 0);
    CHECK(!s.sources.empty());
  }
  CHECK(load_system(test::profiles_dir(), "t4").peak_flops("bf16") == 65e12);       // no bf16 cores: fp16 rate
  CHECK(load_system(test::profiles_dir(), "a100_80g").peak_flops("fp8") == 312e12); // no fp8: 16-bit rate
  CHECK_THROWS_WITH_AS(load_system(test::profiles_dir(), "h100"), doctest::Contains("did you mean h100_sxm"),
                       InputError);
  // Names the directory does not list never reach the filesystem (the cluster fuzzer found a
  // name longer than a file name may be; a path would read another file).
  CHECK_THROWS_AS(load_system(test::profiles_dir(), std::string(300, 'a')), InputError);
  CHECK_THROWS_AS(load_system(test::profiles_dir(), "../systems/h100_sxm"), InputError);
}

TEST_CASE("speculative decoding emits (1 - a^(k+1)) / (1 - a) tokens per step") {
  CHECK(Speculation{}.tokens_per_step() == 1.0);
  CHECK(Speculation{3, 0.5, 0.05}.tokens_per_step() == doctest::Approx(1.875));
  CHECK(Speculation{4, 1.0, 0.05}.tokens_per_step() == 5.0);
}

TEST_CASE("static decode of a dense model is bound by reading the weights") {
  // The built-in default efficiencies (memory 0.8, 4 µs per kernel), not the calibrated ones the
  // system file carries: this checks the step model's physics, test_plan_efficiency_fit
  // the fitted figures.
  SystemSpec h200 = load_system(test::profiles_dir(), "h200_sxm");
  h200.efficiency = DefaultEfficiency{};
  const PerfDatabase db(h200);
  const ModelArch model = resolve_model("llama-3.1-8b");
  const StepModel step(model, h200, db, ParallelConfig{}, ServingPrecision{}, 0);
  const LatencyEstimate one = estimate_static(step, {1000, 129, 0}, 1, Speculation{});
  const double weight_read_ms = model.total_parameters() * 2 / (4800e9 * 0.8) * 1e3;
  CHECK(one.tpot_ms > weight_read_ms);
  CHECK(one.tpot_ms < weight_read_ms * 1.6); // plus KV reads, glue and kernel overheads
  CHECK(one.sources == roofline);
  // Doubling the batch barely moves a memory-bound step; tensor parallelism shortens it.
  CHECK(estimate_static(step, {1000, 129, 0}, 2, Speculation{}).tpot_ms < one.tpot_ms * 1.1);
  const StepModel tp2(model, h200, db, ParallelConfig{2, 1, 1, 1}, ServingPrecision{}, 0);
  // (not halved: the norms and the all-reduce do not shrink with TP, and each kernel pays its launch)
  CHECK(estimate_static(tp2, {1000, 129, 0}, 1, Speculation{}).tpot_ms < one.tpot_ms * 0.75);
  // Prefill of 1000 tokens is compute bound: about 2 · params · tokens FLOPs.
  const double prefill_ms = 2 * model.total_parameters() * 1000 / (989e12 * 0.7) * 1e3;
  CHECK(one.ttft_ms > prefill_ms * 0.9);
  CHECK(one.ttft_ms < prefill_ms * 1.6);
}

TEST_CASE("aggregated estimate follows Algorithm 2") {
  const SystemSpec h200 = load_system(test::profiles_dir(), "h200_sxm");
  const PerfDatabase db(h200);
  const ModelArch model = resolve_model("llama-3.1-8b");
  const StepModel step(model, h200, db, ParallelConfig{}, ServingPrecision{}, 0);
  LatencyEstimate out;
  // batch 1: TTFT = mixed step × ceil(ISL / C) × F_corr with T_total = 1 → F = 2 - 0.1.
  REQUIRE(estimate_aggregated(step, {2000, 100, 0}, 1, 2000, Speculation{}, out));
  StepShape mix;
  mix.prefill_requests = 1;
  mix.prefill_tokens = 2000;
  mix.kv_len = 2050;
  CHECK(out.ttft_ms == doctest::Approx(step.step(mix).us / 1000 * 1.9));
  // A batch that cannot hold its context requests plus a decode slot is rejected (line 17).
  CHECK_FALSE(estimate_aggregated(step, {2000, 100, 0}, 2, 4000, Speculation{}, out));
  // Chunked context: more mixed steps per prompt raise TTFT.
  LatencyEstimate chunked;
  REQUIRE(estimate_aggregated(step, {2000, 100, 0}, 8, 500, Speculation{}, chunked));
  REQUIRE(estimate_aggregated(step, {2000, 100, 0}, 8, 2000, Speculation{}, out));
  CHECK(chunked.ttft_ms > out.ttft_ms);
}

TEST_CASE("rate matching picks x prefill and y decode workers") {
  // prefill 2 req/s per 1-GPU worker, decode 3 req/s per 2-GPU worker on 8 GPUs: 2P + ... must
  // divide 8; 4P(4) + 2D(4) gives min(4·2·0.9, 2·3·0.92) = 5.52 req/s on 8 GPUs.
  const RateMatch match = rate_match(2, 1, 3, 2, 8, DisaggregationFactors{});
  CHECK(match.gpus > 0);
  CHECK(8 % match.gpus == 0);
  CHECK(match.requests_per_s / match.gpus >= 5.52 / 8 - 1e-9);
  CHECK(rate_match(2, 8, 3, 8, 8, DisaggregationFactors{}).gpus == 0); // 16 GPUs do not fit
}

TEST_CASE("Pareto front keeps only undominated rows") {
  std::vector<PlanRow> rows(4);
  rows[0].tokens_per_s_per_user = 100, rows[0].tokens_per_s_per_gpu = 10;
  rows[1].tokens_per_s_per_user = 50, rows[1].tokens_per_s_per_gpu = 40;
  rows[2].tokens_per_s_per_user = 60, rows[2].tokens_per_s_per_gpu = 5; // dominated by 0
  rows[3].tokens_per_s_per_user = 20, rows[3].tokens_per_s_per_gpu = 80;
  CHECK(pareto_front(rows, {0, 1, 2, 3}) == std::vector<std::size_t>{0, 1, 3});
}

TEST_CASE("expert-parallel imbalance under power-law routing") {
  CHECK(expert_parallel_imbalance(128, 1, 1.2) == 1.0);
  CHECK(expert_parallel_imbalance(128, 8, 0) == 1.0);
  const double skewed = expert_parallel_imbalance(128, 8, 1.2);
  CHECK(skewed > 1.1);
  CHECK(skewed < 8.0);
  CHECK(expert_parallel_imbalance(128, 32, 1.2) > skewed); // fewer experts per rank, more skew
}

TEST_CASE("memory: weights + KV beyond the GPU are infeasible, and never in a plan") {
  const SystemSpec h100 = load_system(test::profiles_dir(), "h100_sxm");
  const ModelArch model = resolve_model("llama-3.1-70b");
  const MemoryBudget one_gpu = memory_budget(model, h100, {}, {}, Engine::vllm, 0.9, 4096, 4500);
  CHECK(one_gpu.weight_bytes > 130e9);
  CHECK_FALSE(one_gpu.fits(1));
  const MemoryBudget tp8 = memory_budget(model, h100, {8, 1, 1, 1}, {}, Engine::vllm, 0.9, 4096, 4500);
  CHECK(tp8.fits(64));
  // KV per sequence per GPU: 80 layers × 2 × 1 head × 128 × 2 bytes × 4500 tokens.
  CHECK(tp8.kv_bytes_per_sequence == doctest::Approx(80.0 * 2 * 128 * 2 * 4500));
  // TensorRT-LLM's fraction applies to what is free after weights; vLLM's to the whole GPU.
  const MemoryBudget trt = memory_budget(model, h100, {8, 1, 1, 1}, {}, Engine::trtllm, 0.9, 4096, 4500);
  CHECK(trt.kv_budget_bytes > tp8.kv_budget_bytes);

  PlanRequest request;
  request.model = model;
  request.gpus = 4;
  request.workload = {8000, 2000, 0};
  request.modes = {ServingMode::static_batching, ServingMode::aggregated, ServingMode::disaggregated};
  const PlanResult result = search(request, h100, PerfDatabase(h100));
  CHECK(result.memory_infeasible > 0);
  REQUIRE(!result.rows.empty());
  for (const auto& row : result.rows) {
    CAPTURE(describe(row, false));
    CHECK(row.parallel.gpus() >= 2); // 70B in bf16 never fits one 80 GB GPU
    CHECK(row.memory_gib <= h100.memory_gib * 0.9 + 1e-9);
  }
}

TEST_CASE("the search meets the SLA it reports, and --target-rate sizes the cluster") {
  const SystemSpec h200 = load_system(test::profiles_dir(), "h200_sxm");
  PlanRequest request;
  request.model = resolve_model("llama-3.1-70b");
  request.gpus = 8;
  request.workload = {4000, 500, 0};
  request.ttft_limit_ms = 1200;
  request.tpot_limit_ms = 20;
  request.target_requests_per_s = 30;
  const PlanResult result = search(request, h200, PerfDatabase(h200));
  REQUIRE(result.best);
  const PlanRow& best = result.rows[*result.best];
  CHECK(best.ttft_ms <= 1200);
  CHECK(best.tpot_ms <= 20);
  for (const auto& row : result.rows)
    if (row.meets_sla)
      CHECK(row.tokens_per_s_per_gpu <= best.tokens_per_s_per_gpu);
  REQUIRE(result.target);
  const PlanRow& sized = result.rows[result.target->row];
  CHECK(sized.requests_per_s * result.target->replicas >= 30);
  CHECK(result.target->gpus == result.target->replicas * sized.unit_gpus);

  // Selection is separate from enumeration: re-selecting the same rows under a looser SLA needs no
  // new estimate, and picks what a fresh search under that SLA picks.
  PlanResult reselected = enumerate_configurations(request, h200, PerfDatabase(h200));
  CHECK(reselected.rows.size() == result.rows.size());
  CHECK(!reselected.best);
  request.tpot_limit_ms = 40;
  select_configurations(request, reselected);
  const PlanResult fresh = search(request, h200, PerfDatabase(h200));
  REQUIRE(reselected.best);
  REQUIRE(fresh.best);
  CHECK(*reselected.best == *fresh.best);
  CHECK(reselected.rows[*reselected.best].tokens_per_s_per_gpu > best.tokens_per_s_per_gpu);
  CHECK(reselected.pareto == fresh.pareto);
  request.tpot_limit_ms = 20;

  // A request-latency budget (--e2e) between the slowest and the fastest SLA-meeting requests
  // drops exactly the rows whose TTFT + (OSL − 1)·TPOT exceeds it.
  double fastest = 1e300, slowest = 0;
  for (const auto& row : result.rows)
    if (row.meets_sla) {
      CHECK(row.request_latency_ms == doctest::Approx(row.ttft_ms + 499 * row.tpot_ms));
      fastest = std::min(fastest, row.request_latency_ms);
      slowest = std::max(slowest, row.request_latency_ms);
    }
  REQUIRE(fastest < slowest);
  PlanRequest budget = request;
  budget.request_latency_limit_ms = (fastest + slowest) / 2;
  PlanResult bounded = result;
  select_configurations(budget, bounded);
  REQUIRE(bounded.best);
  for (std::size_t i = 0; i < bounded.rows.size(); ++i)
    CHECK(bounded.rows[i].meets_sla ==
          (result.rows[i].meets_sla && result.rows[i].request_latency_ms <= *budget.request_latency_limit_ms));
  CHECK(bounded.rows[*bounded.best].request_latency_ms <= *budget.request_latency_limit_ms);

  // The vLLM launch script carries the row's parallelism and batch.
  const std::string script =
      launch_script(best, {"meta-llama/Llama-3.1-70B-Instruct", "h200_sxm", &request, Engine::vllm});
  CHECK(script.find("--tensor-parallel-size " + std::to_string(best.parallel.tp)) != std::string::npos);
  CHECK(script.find("--max-num-seqs " + std::to_string(best.batch)) != std::string::npos);
}
