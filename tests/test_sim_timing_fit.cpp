// The fit recovers step costs the simulator itself produced: trials observed on a known timing
// are fitted from a start far away.
#include "core/error.hpp"
#include "sim/timing_fit.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::sim;

TEST_CASE("calibration recovers the step costs behind observed trials") {
  SimTiming truth;
  truth.step_base_s = 0.006;
  truth.prefill_token_s = 3e-5;
  truth.decode_seq_s = 4e-4;
  truth.noise_cv = 0;
  SimKnobs knobs;
  knobs.max_num_seqs = 16;
  std::vector<ObservedTrial> trials;
  struct Shape {
    int concurrency;
    double rate, prompt;
  };
  for (const Shape& shape : {Shape{1, 0, 200}, Shape{0, 10, 200}, Shape{0, 30, 800}, Shape{0, 60, 100}}) {
    ObservedTrial t;
    t.concurrency = shape.concurrency;
    t.rate = shape.rate;
    t.requests = 300;
    t.prompt_tokens = shape.prompt;
    t.output_tokens = 40;
    const auto s = simulate_trial(t, truth, knobs, 1);
    t.ttft = s[0];
    t.tpot = s[1];
    t.e2e = s[2];
    trials.push_back(t);
  }
  SimTiming start;
  start.step_base_s = 0.05;
  start.prefill_token_s = 1e-6;
  start.decode_seq_s = 1e-5;
  const auto fit = fit_timing(trials, knobs, start);
  CHECK(fit.timing.step_base_s == doctest::Approx(truth.step_base_s).epsilon(0.05));
  CHECK(fit.timing.prefill_token_s == doctest::Approx(truth.prefill_token_s).epsilon(0.15));
  CHECK(fit.timing.decode_seq_s == doctest::Approx(truth.decode_seq_s).epsilon(0.15));
  CHECK(fit.rms_log_error < 0.02);
  REQUIRE(fit.simulated.size() == trials.size());

  CHECK_THROWS_AS(fit_timing({}, knobs, start), InputError);
}
