// Sampling: greedy is argmax; seeded sampling is reproducible, respects top-k / top-p, and its
// frequencies follow softmax(logits / temperature).
#include "core/error.hpp"
#include "runtime/sampler.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <map>

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
