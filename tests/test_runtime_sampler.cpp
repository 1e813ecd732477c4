// Sampling: greedy is argmax; seeded sampling is reproducible, respects top-k / top-p, and its
// frequencies follow softmax(logits / temperature).
#include "core/error.hpp"
#include "runtime/logits_processor.hpp"
#include "runtime/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>
#include <limits>
#include <map>
#include <random>
#include <vector>

using namespace optkit;
using namespace optkit::runtime;

TEST_CASE("temperature 0 is argmax with the lowest index on ties") {
  Sampler s({});
  const std::vector<float> logits{0.1f, 2.0f, 2.0f, -1.0f};
  CHECK(s.next(logits) == 1);
}

TEST_CASE("seeded sampling is reproducible and follows the softmax") {
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler a({1.0f, 0, 1.0f, 42}), b({1.0f, 0, 1.0f, 42});
  std::map<TokenId, int> counts;
  for (int i = 0; i < 20000; ++i) {
    const auto t = a.next(logits);
    CHECK(t == b.next(logits));
    ++counts[t];
  }
  CHECK(counts[0] / 20000.0 == doctest::Approx(0.5).epsilon(0.05));
  CHECK(counts[2] / 20000.0 == doctest::Approx(0.2).epsilon(0.08));
}

// The draw as a plain inverse-CDF walk over the whole vocabulary, weights below e^-80 of the top
// token's taken as 0: what the sampler's plain-temperature path must return token for token.
TokenId
whole_vocabulary_draw(const std::vector<float>& logits, float temperature, std::mt19937_64& rng) {
  const float top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weights(logits.size());
  double total = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double z = static_cast<double>(logits[i] - top) / static_cast<double>(temperature);
    total += weights[i] = z < -80.0 ? 0.0 : std::exp(z);
  }
  double draw = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    draw -= weights[i];
    if (draw < 0.0)
      return static_cast<TokenId>(i);
  }
  return argmax(logits);
}

TEST_CASE("plain temperature sampling draws what a walk over the whole vocabulary draws") {
  std::mt19937_64 make(7);
  for (const float temperature : {0.05f, 0.7f, 1.0f, 3.0f}) {
    for (int trial = 0; trial < 40; ++trial) {
      // Spreads from a near-uniform row to one where a few tokens sit just either side of the
      // e^-80 cut, which the sampler's pre-test must not move.
      const std::vector<float> spreads{0.5f, 20.0f, 200.0f, 80.0f * temperature};
      const float spread = spreads[static_cast<std::size_t>(trial % 4)];
      std::vector<float> logits(1000);
      std::uniform_real_distribution<float> value(-spread, 0.0f);
      for (auto& l : logits)
        l = value(make);
      if (trial % 4 == 3)
        for (int k = 0; k < 50; ++k)
          logits[static_cast<std::size_t>(k * 20)] = -80.0f * temperature * (1.0f + static_cast<float>(k - 25) * 1e-6f);
      logits[static_cast<std::size_t>(trial * 7 % 1000)] = 0.0f;
      const std::uint64_t seed = 100 + static_cast<std::uint64_t>(trial);
      Sampler sampler({temperature, 0, 1.0f, seed});
      std::mt19937_64 rng(seed);
      for (int draw = 0; draw < 50; ++draw)
        REQUIRE(sampler.next(logits) == whole_vocabulary_draw(logits, temperature, rng));
    }
  }
}

TEST_CASE("top-k and top-p cut the tail") {
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  Sampler k({1.0f, 2, 1.0f, 7});
  Sampler p({1.0f, 0, 0.75f, 7}); // 0.5 + 0.3 reaches 0.75: only tokens 0 and 1 remain
  for (int i = 0; i < 2000; ++i) {
    CHECK(k.next(logits) < 2);
    CHECK(p.next(logits) < 2);
  }
  // min-p 0.25: 0.15 / 0.5 = 0.3 stays, 0.05 / 0.5 = 0.1 goes
  Sampler m({1.0f, 0, 1.0f, 7, 0.25f});
  bool saw_third = false;
  for (int i = 0; i < 4000; ++i) {
    const auto t = m.next(logits);
    CHECK(t < 3);
    saw_third = saw_third || t == 2;
  }
  CHECK(saw_third);
  CHECK_THROWS_AS(Sampler({1.0f, 0, 1.0f, 0, 1.5f}), InputError);
  CHECK_THROWS_AS(Sampler({-1.0f, 0, 1.0f, 0}), InputError);
  CHECK_THROWS_AS(Sampler({1.0f, 0, 0.0f, 0}), InputError);
}

TEST_CASE(
    "penalties as vLLM applies them: repetition on prompt and output tokens, frequency and presence on the output") {
  const std::vector<TokenId> prompt{0, 4, 4}, output{1, 1, 2, 99}; // 99: outside the vocabulary, ignored
  std::vector<float> logits{2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  apply_penalties(logits, {.presence = 0.25f, .frequency = 0.5f, .repetition = 2.0f}, prompt, output);
  CHECK(logits[0] == 1.0f);   // prompt: 2 / 2
  CHECK(logits[1] == -5.25f); // output twice: -2 · 2 − 0.5 · 2 − 0.25
  CHECK(logits[2] == -0.25f); // output once: 1 / 2 − 0.5 − 0.25
  CHECK(logits[3] == 0.5f);   // neither
  CHECK(logits[4] == 1.5f);   // prompt (twice counts once): 3 / 2
  std::vector<float> no_repetition{2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  apply_penalties(no_repetition, {.presence = 0.25f, .frequency = 0.5f}, prompt, output);
  CHECK(no_repetition == std::vector<float>{2.0f, -3.25f, 0.25f, 0.5f, 3.0f}); // the prompt is not penalised
  std::vector<float> none{2.0f, -2.0f};
  apply_penalties(none, {}, prompt, output);
  CHECK(none == std::vector<float>{2.0f, -2.0f});
}

TEST_CASE("the logits processor: the row itself when no rule applies; else bias, then penalties, then forbidden "
          "tokens") {
  const std::vector<float> row = {1.0f, 2.0f, 3.0f, -1.0f};
  runtime::LogitsProcessor processor;
  CHECK(processor.process(row, {}).data() == row.data()); // nothing copied
  const std::vector<std::pair<runtime::TokenId, float>> bias = {{3, 2.0f}};
  const std::vector<runtime::TokenId> prompt = {0}, output = {3};
  runtime::LogitsRules rules{bias, {.repetition = 2.0f}, prompt, output, {1}};
  const auto processed = processor.process(row, rules);
  REQUIRE(processed.size() == 4);
  CHECK(processed[0] == 0.5f);                                    // in the prompt: 1 / 2
  CHECK(processed[1] == -std::numeric_limits<float>::infinity()); // may not come yet
  CHECK(processed[2] == 3.0f);                                    // untouched
  CHECK(processed[3] == 0.5f);                                    // -1 + 2 (bias first), then / 2 (in the output)
  CHECK(row[3] == -1.0f);                                         // the raw row is left as it was
}
