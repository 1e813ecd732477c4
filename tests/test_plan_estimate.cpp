// plan estimate: one configuration priced by the search's own functions, so its row is the row the
// search printed (every field, exactly), and its step breakdown adds up to the step's latency.
#include "core/error.hpp"
#include "plan/estimate_run.hpp"
#include "plan/plan_run.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit;
using namespace optkit::plan;

namespace {

PlanOptions
options_for(const std::string& model, const std::string& system, int gpus, const std::string& modes) {
  PlanOptions o;
  o.model = model;
  o.system = system;
  o.gpus = gpus;
  o.isl = 4000;
  o.osl = 500;
  o.ttft_ms = 1200;
  o.tpot_ms = 20;
  o.modes = modes;
  return o;
}

EstimateOptions
estimate_of(const PlanOptions& plan, const PlanRow& row) {
  EstimateOptions e;
  e.plan = plan;
  e.mode = mode_name(row.mode);
  e.parallel = row.parallel;
  e.batch = row.batch;
  if (row.mode == ServingMode::aggregated)
    e.ctx_tokens = row.ctx_tokens;
  if (row.mode == ServingMode::disaggregated) {
    e.prefill_parallel = row.prefill_parallel;
    e.prefill_batch = row.prefill_batch;
  }
  return e;
}

// The search's rows of one request, judged against its SLA.
PlanResult
searched(const PlanOptions& o) {
  const PlanRequest request = plan_request(o);
  const perf::SystemSpec system = load_plan_system(o);
  const perf::PerfDatabase db = load_perf_database(o, system);
  return search(request, system, db);
}

void
check_rows_reproduced(const PlanOptions& o, std::size_t stride) {
  const PlanRequest request = plan_request(o);
  const PlanResult result = searched(o);
  REQUIRE(!result.rows.empty());
  std::size_t checked = 0;
  for (std::size_t i = 0; i < result.rows.size(); i += stride) {
    const PlanRow& row = result.rows[i];
    EstimateOptions e = estimate_of(o, row);
    e.plan.modes = e.mode;
    const EstimateRun run = run_estimate(e, {});
    CAPTURE(describe(row, request.model.is_moe()));
    // Every field, compared as JSON of doubles: no tolerance.
    CHECK(row_json(run.row, request).dump() == row_json(row, request).dump());
    ++checked;
  }
  CHECK(checked > 5);
}

} // namespace

TEST_CASE("plan estimate reproduces the search's rows exactly, in every mode") {
  SUBCASE("a dense model, aggregated and static") {
    check_rows_reproduced(options_for("llama-3.1-70b", "h200_sxm", 8, "agg,static"), 37);
  }
  SUBCASE("a dense model, disaggregated") {
    check_rows_reproduced(options_for("llama-3.1-70b", "h200_sxm", 8, "disagg"), 7);
  }
  SUBCASE("a mixture of experts with attention DP and expert parallelism") {
    check_rows_reproduced(options_for("qwen3-235b-a22b", "h200_sxm", 8, "agg,disagg"), 41);
  }
  SUBCASE("speculative decoding with a prefix cache") {
    PlanOptions o = options_for("llama-3.1-8b", "h100_sxm", 4, "agg");
    o.spec_tokens = 3;
    o.prefix = 1000;
    check_rows_reproduced(o, 13);
  }
}

TEST_CASE("plan estimate's step parts add up to the step, and the step is the one the row priced") {
  EstimateOptions e;
  e.plan = options_for("llama-3.1-70b", "h200_sxm", 8, "agg");
  e.parallel.tp = 4;
  e.batch = 32;
  const EstimateRun run = run_estimate(e, {});
  REQUIRE(run.steps.size() == 2);
  CHECK(run.steps[0].name == "mixed");
  CHECK(run.steps[1].name == "decode");
  for (const PricedStep& step : run.steps) {
    double sum = 0;
    for (const perf::Estimate& part : step.parts.parts)
      sum += part.us;
    CHECK(step.parts.total().us == doctest::Approx(sum).epsilon(1e-12));
    CHECK(step.parts[perf::StepPart::gemm].us > 0);
    CHECK(step.parts[perf::StepPart::attention].us > 0);
    CHECK(step.parts[perf::StepPart::communication].us > 0); // TP 4 all-reduces
    CHECK(step.parts[perf::StepPart::moe].us == 0);          // a dense model
  }
  // The mixed step: one whole 4000-token prompt beside the batch's other sequences decoding.
  CHECK(run.steps[0].shape.prefill_tokens == 4000);
  CHECK(run.steps[0].shape.decode_requests == 31);
  // The decode step at the mean KV length; its time and the TPOT bound each other: a mixed step
  // is slower than a decode step, and the TPOT lies between them.
  CHECK(run.steps[1].shape.kv_len == 4250);
  const double decode_ms = run.steps[1].parts.total().us / 1000;
  CHECK(run.row.tpot_ms >= decode_ms);
  CHECK(run.row.tpot_ms <= run.steps[0].parts.total().us / 1000);
  // Memory: the row's figure is the budget's parts at this batch.
  const double gib = 1024.0 * 1024.0 * 1024.0;
  CHECK(run.row.memory_gib == doctest::Approx((run.memory.weight_bytes + run.memory.activation_bytes +
                                               run.memory.reserve_bytes + 32 * run.memory.kv_bytes_per_sequence) /
                                              gib));
  // And the JSON has every term.
  const auto json = to_json(run);
  for (const char* part : {"gemm", "attention", "communication", "moe", "memory"})
    CHECK(json["steps"][0]["parts"].contains(part));
  CHECK(json["configuration"]["ttft_ms"] == run.row.ttft_ms);
}

TEST_CASE("a mixture of experts' routed experts and their dispatch are the moe part") {
  EstimateOptions e;
  e.plan = options_for("qwen3-235b-a22b", "h200_sxm", 8, "agg");
  e.parallel = {2, 1, 4, 8}; // tp2 dp4 ep8
  e.batch = 64;
  const EstimateRun run = run_estimate(e, {});
  for (const PricedStep& step : run.steps)
    CHECK(step.parts[perf::StepPart::moe].us > 0);
}

TEST_CASE("plan estimate refuses what the search would not form, saying why") {
  EstimateOptions e;
  e.plan = options_for("llama-3.1-70b", "h200_sxm", 8, "agg");
  e.parallel.tp = 3;
  CHECK_THROWS_WITH_AS(run_estimate(e, {}), doctest::Contains("not a worker layout plan searches"), InputError);
  e.parallel.tp = 1; // 140 GB of BF16 weights on one 141 GB GPU
  CHECK_THROWS_WITH_AS(run_estimate(e, {}), doctest::Contains("leave no room for a KV cache"), InputError);
  e.parallel.tp = 2;
  e.batch = 4000;
  CHECK_THROWS_WITH_AS(run_estimate(e, {}), doctest::Contains("--batch 4000"), InputError);
  e.batch = 2;
  e.ctx_tokens = 16000;
  CHECK_THROWS_WITH_AS(run_estimate(e, {}), doctest::Contains("more prompt tokens per step than"), InputError);
  e.ctx_tokens = 8000; // two whole prompts a step leave none of the two sequences decoding
  CHECK_THROWS_WITH_AS(run_estimate(e, {}), doctest::Contains("no sequence is left to decode"), InputError);
  e.ctx_tokens = 0;
  e.mode = "agg,disagg";
  CHECK_THROWS_WITH_AS(run_estimate(e, {}), doctest::Contains("prices one configuration"), InputError);
  e.mode = "static";
  e.ctx_tokens = 512;
  CHECK_THROWS_WITH_AS(run_estimate(e, {}), doctest::Contains("only aggregated serving"), InputError);
  e.mode = "disagg";
  e.ctx_tokens = 0;
  e.parallel.tp = 8; // a decode worker of every GPU leaves none for prefill
  e.prefill_parallel.tp = 4;
  CHECK_THROWS_WITH_AS(run_estimate(e, {}), doctest::Contains("no xPyD unit"), InputError);
}
