// The statistics lm-eval lacks, on per-item outcomes kept for both runs: the score's standard
// error as lm-eval computes it, recovery (compressed ÷ baseline) with a paired bootstrap
// confidence interval, exact McNemar for pass/fail items, a paired bootstrap test for continuous
// scores, and mean/STD/RSD across trials (OptiKit Table 3).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace optkit::eval {

// lm-eval's stderr of a mean: sample standard deviation (n − 1) / √n; 0 for fewer than 2 items.
double mean_stderr(std::span<const double> scores);

// lm-eval's pooled_sample_stderr, a group's stderr from its members' stderrs and sizes:
// √(Σ (nᵢ − 1)·nᵢ·seᵢ² / (N − k) / N). NaN when N ≤ k (every member a single item).
double pooled_stderr(std::span<const double> stderrs, std::span<const std::size_t> sizes);

struct McNemar {
  std::int64_t baseline_only = 0;  // b: passed on the baseline, failed on the candidate
  std::int64_t candidate_only = 0; // c: the reverse
  double p_value = 1;              // two-sided exact binomial on min(b, c) of b + c at ½
};
// Items pass where the score is ≥ 0.5. Throws InputError if the spans differ in length.
McNemar exact_mcnemar(std::span<const double> baseline, std::span<const double> candidate);

struct PairedComparison {
  double baseline_mean = 0, candidate_mean = 0;
  double recovery = 0;                        // candidate ÷ baseline (NaN when the baseline scores 0)
  double recovery_low = 0, recovery_high = 0; // percentile bootstrap interval at `confidence`
  double difference = 0;                      // candidate − baseline
  double p_value = 1;                         // two-sided: McNemar when binary, paired bootstrap otherwise
  bool binary = true;
  McNemar mcnemar;
};

struct BootstrapOptions {
  int resamples = 10'000;
  double confidence = 0.95;
  std::uint64_t seed = 1234;
};

// Items are paired by position (the same document in both runs).
PairedComparison compare_paired(std::span<const double> baseline, std::span<const double> candidate,
                                const BootstrapOptions& options = {});

// Holm's step-down adjustment of p-values (same order out as in): controls the family-wise error
// rate when a gate tests several metrics or trials at once.
std::vector<double> holm_adjust(const std::vector<double>& p_values);

// Mean, sample STD and RSD (STD ÷ mean) of one metric across trials.
struct TrialSpread {
  std::size_t trials = 0;
  double mean = 0, stddev = 0, rsd = 0;
};
TrialSpread trial_spread(std::span<const double> values);

} // namespace optkit::eval
