// The simulator against cases worked out by hand and against queueing theory (M/D/1's
// Pollaczek–Khinchine mean wait), in virtual time.
#include "core/error.hpp"
#include "sim/segment.hpp"
#include "sim/serving_simulator.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit;
using namespace optkit::sim;

namespace {

SimTiming
flat_timing(double step) {
  SimTiming t;
  t.step_base_s = step;
  t.prefill_token_s = 0;
  t.decode_seq_s = 0;
  t.noise_cv = 0;
  return t;
}

} // namespace

TEST_CASE("continuous batching admits an arrival at the next step boundary, coalesced steps included") {
  // Every step costs 10 ms. Job 0 (10 tokens) starts at 0; job 1 (10 tokens) arrives at 50 ms.
  const SimTiming t = flat_timing(0.01);
  SimKnobs k;
  k.max_num_seqs = 2;
  const std::vector<SimJob> jobs{{0.0, 1, 10}, {0.05, 1, 10}};
  SimOptions o;
  o.record_token_times = true;
  const auto r = run_open_loop(t, k, jobs, o);
  CHECK(r[0].first_token == doctest::Approx(0.01)); // the prefill step samples the first token
  CHECK(r[1].start == doctest::Approx(0.05));
  CHECK(r[1].first_token == doctest::Approx(0.06));
  CHECK(r[0].end == doctest::Approx(0.10)); // 1 + 4 + 1 + 4 tokens
  CHECK(r[1].end == doctest::Approx(0.15));
  CHECK(r[0].token_times.size() == 10);
  CHECK(r[1].token_times.size() == 10);
  CHECK(r[1].token_times.back() == doctest::Approx(0.15));
}

TEST_CASE("one closed-loop client sees exactly the service time") {
  SimTiming t;
  t.step_base_s = 0.004;
  t.prefill_token_s = 2e-5;
  t.decode_seq_s = 1e-4;
  t.noise_cv = 0;
  SimKnobs k;
  const std::vector<SimJob> jobs(5, SimJob{0, 100, 20});
  const auto r = run_closed_loop(t, k, jobs, 1, SimOptions{});
  const double service = (0.004 + 100 * 2e-5) + 19 * (0.004 + 1e-4);
  for (std::size_t i = 0; i < r.size(); ++i) {
    CHECK(r[i].e2e() == doctest::Approx(service));
    CHECK(r[i].arrival == doctest::Approx(service * static_cast<double>(i)));
  }
}

TEST_CASE("one slot under Poisson arrivals is an M/D/1 queue") {
  // Service S = prefill step + 9 decode steps, deterministic; ρ = 0.7. Pollaczek–Khinchine:
  // mean wait = ρ·S / (2(1 − ρ)).
  const SimTiming t = flat_timing(0.01);
  SimKnobs k;
  k.max_num_seqs = 1;
  const double service = 0.1, rho = 0.7;
  SegmentSpec spec;
  spec.workload.rate = rho / service;
  spec.workload.prompt_mean = 1;
  spec.workload.prompt_log_sd = 0;
  spec.workload.output_mean = 10;
  spec.workload.output_log_sd = 0;
  spec.warmup_s = 0;
  spec.min_duration_s = 0;
  spec.min_completions = 60000;
  const auto jobs = segment_jobs(spec, 3);
  const auto r = run_open_loop(t, k, jobs, SimOptions{});
  double wait = 0;
  for (const auto& q : r) {
    CHECK(q.end - q.start == doctest::Approx(service).epsilon(1e-9));
    wait += q.start - q.arrival;
  }
  wait /= static_cast<double>(r.size());
  // Steps start only on step boundaries of a busy server, so an arrival to an idle server starts
  // at once (as in M/D/1); the expected wait matches within sampling error.
  CHECK(wait == doctest::Approx(rho * service / (2 * (1 - rho))).epsilon(0.04));
}

TEST_CASE("static batching pads the prefill to the longest prompt and holds freed slots") {
  SimTiming t = flat_timing(0.01);
  t.prefill_token_s = 1e-4;
  SimKnobs k;
  k.batching = Batching::static_batches;
  k.max_num_seqs = 2;
  const std::vector<SimJob> jobs{{0.0, 10, 2}, {0.0, 100, 5}, {0.0, 1, 1}};
  const auto r = run_open_loop(t, k, jobs, SimOptions{});
  const double prefill = 0.01 + 1e-4 * 2 * 100;
  CHECK(r[0].first_token == doctest::Approx(prefill));
  CHECK(r[1].first_token == doctest::Approx(prefill));
  CHECK(r[0].end == doctest::Approx(prefill + 0.01));
  CHECK(r[1].end == doctest::Approx(prefill + 0.04));
  // Job 2 waits for the whole batch, not for job 0's slot.
  CHECK(r[2].start == doctest::Approx(prefill + 0.04));
}

TEST_CASE("static batching waits up to max_wait for a fuller batch") {
  const SimTiming t = flat_timing(0.01);
  SimKnobs k;
  k.batching = Batching::static_batches;
  k.max_num_seqs = 4;
  k.max_wait_s = 0.02;
  const std::vector<SimJob> jobs{{0.0, 1, 1}, {0.015, 1, 1}, {0.5, 1, 1}};
  const auto r = run_open_loop(t, k, jobs, SimOptions{});
  CHECK(r[0].start == doctest::Approx(0.02)); // the deadline, with job 1 on board
  CHECK(r[1].start == doctest::Approx(0.02));
  CHECK(r[2].start == doctest::Approx(0.52));
}

TEST_CASE("speculative rounds: full acceptance emits k + 1 tokens a round, none emits one") {
  SimTiming t = flat_timing(0.01);
  t.draft_step_s = 0.001;
  t.draft_seq_s = 0;
  t.verify_token_s = 0;
  SimKnobs k;
  k.speculative_tokens = 4;
  const std::vector<SimJob> jobs{{0.0, 1, 9}};
  t.acceptance = 1.0;
  auto r = run_open_loop(t, k, jobs, SimOptions{});
  const double round = 0.01 + 4 * 0.001;
  CHECK(r[0].end == doctest::Approx(0.01 + 2 * round)); // 1 + 5 + 3 (capped)
  t.acceptance = 0.0;
  r = run_open_loop(t, k, jobs, SimOptions{});
  CHECK(r[0].end == doctest::Approx(0.01 + 8 * round)); // one token a round, each paying 4 drafts
}

TEST_CASE("the KV capacity holds a request back until another frees its tokens") {
  SimTiming t = flat_timing(0.01);
  t.kv_capacity_tokens = 100;
  SimKnobs k;
  const std::vector<SimJob> jobs{{0.0, 50, 10}, {0.0, 50, 10}};
  const auto r = run_open_loop(t, k, jobs, SimOptions{});
  CHECK(r[1].start == doctest::Approx(r[0].end));
  const std::vector<SimJob> too_big{{0.0, 95, 10}};
  CHECK_THROWS_AS(run_open_loop(t, k, too_big, SimOptions{}), InputError);
}

TEST_CASE("segments measure goodput as SLO-meeting requests per second of the window (Eq. 1)") {
  std::vector<SimRequest> served(4);
  const double ends[] = {0.5, 2.0, 0.9, 3.0};
  for (std::size_t i = 0; i < 4; ++i) {
    served[i].arrival = static_cast<double>(i);
    served[i].first_token = served[i].arrival + 0.1;
    served[i].end = served[i].arrival + ends[i];
    served[i].output_tokens = 10;
  }
  const auto m = measure(served, 1.0, 3.0, 1.0); // requests 1..3 over 2 s
  CHECK(m.measured == 3);
  CHECK(m.goodput == doctest::Approx(0.5)); // only request 2 meets 1 s
  CHECK(m.throughput == doctest::Approx(1.5));
  CHECK(m.attainment == doctest::Approx(1.0 / 3));
  CHECK(m.p50 == doctest::Approx(2.0));
}

TEST_CASE("segments are deterministic in their seed and differ across seeds") {
  SegmentSpec spec;
  spec.workload.rate = 5;
  spec.min_completions = 300;
  spec.min_duration_s = 30;
  const SimTiming t;
  SimKnobs k;
  k.max_num_seqs = 8;
  const auto a = run_segment(t, k, spec, 11), b = run_segment(t, k, spec, 11), c = run_segment(t, k, spec, 12);
  CHECK(a.p99 == b.p99);
  CHECK(a.goodput == b.goodput);
  CHECK(a.p99 != c.p99);
  CHECK(a.measured >= 300);
}

TEST_CASE("a step-cost model prices each step from its chunks and KV lengths, as the linear terms would") {
  // The same linear cost written both ways: the model's steps, coalesced decode runs included, cost
  // what the built-in terms cost.
  SimTiming linear;
  linear.step_base_s = 0.004;
  linear.prefill_token_s = 2e-5;
  linear.decode_seq_s = 1e-4;
  linear.kv_token_s = 1e-7;
  linear.noise_cv = 0;
  SimTiming model = linear;
  model.step_cost = [](const SimStep& step) {
    double seconds = 0.004;
    for (const auto& chunk : step.prefills)
      seconds += 2e-5 * chunk.new_tokens;
    for (double context : step.decode_contexts)
      seconds += 1e-4 + 1e-7 * context;
    return seconds;
  };
  SimKnobs k;
  k.max_num_seqs = 4;
  k.max_num_batched_tokens = 256;
  const std::vector<SimJob> jobs{{0.0, 300, 40}, {0.01, 120, 25}, {0.2, 50, 60}, {0.21, 700, 5}};
  const auto a = run_open_loop(linear, k, jobs, {});
  const auto b = run_open_loop(model, k, jobs, {});
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    CHECK(b[i].first_token == doctest::Approx(a[i].first_token).epsilon(1e-9));
    CHECK(b[i].end == doctest::Approx(a[i].end).epsilon(1e-9));
  }
}

TEST_CASE("a prefilled request starts decoding at once, its prompt already in the KV cache") {
  SimTiming t = flat_timing(0.01);
  std::vector<double> contexts;
  t.step_cost = [&](const SimStep& step) {
    CHECK(step.prefills.empty());
    contexts.insert(contexts.end(), step.decode_contexts.begin(), step.decode_contexts.end());
    return 0.01;
  };
  SimKnobs k;
  const std::vector<SimJob> jobs{{0.5, 100, 4, true}};
  const auto r = run_open_loop(t, k, jobs, {});
  CHECK(r[0].first_token == doctest::Approx(0.51)); // the first decode step, no prefill
  CHECK(r[0].end == doctest::Approx(0.54));
  REQUIRE(!contexts.empty());
  CHECK(contexts.front() == 100); // attends to the prompt from the first step
  k.batching = Batching::static_batches;
  CHECK_THROWS_AS(run_open_loop(t, k, jobs, {}), InputError);
}
