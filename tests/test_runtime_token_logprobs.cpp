// position_logprobs against values worked by hand: log-softmax, the chosen token, the n best in
// order with ties broken by the lower id, and no overflow at extreme logits.
#include "core/error.hpp"
#include "runtime/token_logprobs.hpp"

#include <cmath>
#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::runtime;

TEST_CASE("log-softmax of the chosen token and the n most likely, in order") {
  // Probabilities 1/2, 1/4, 1/8, 1/8 as logits shifted by 3: log-softmax removes the shift.
  const std::vector<float> logits = {3 + std::log(0.125f), 3 + std::log(0.5f), 3 + std::log(0.125f),
                                     3 + std::log(0.25f)};
  const auto got = position_logprobs(logits, 2, 3);
  CHECK(got.chosen.token == 2);
  CHECK(got.chosen.logprob == doctest::Approx(std::log(0.125)).epsilon(1e-6));
  REQUIRE(got.top.size() == 3);
  CHECK(got.top[0].token == 1);
  CHECK(got.top[0].logprob == doctest::Approx(std::log(0.5)).epsilon(1e-6));
  CHECK(got.top[1].token == 3);
  CHECK(got.top[2].token == 0); // tied with 2: the lower id first
  CHECK(position_logprobs(logits, 0, 0).top.empty());
  CHECK(position_logprobs(logits, 0, 10).top.size() == 4); // never more than the vocabulary
}

TEST_CASE("extreme logits stay finite where they should and the chosen id is checked") {
  const std::vector<float> logits = {1000.0f, -1000.0f, 999.0f};
  const auto got = position_logprobs(logits, 0, 2);
  CHECK(got.chosen.logprob == doctest::Approx(-std::log1p(std::exp(-1.0))).epsilon(1e-5));
  CHECK(got.top[1].token == 2);
  CHECK(std::isfinite(position_logprobs(logits, 1, 0).chosen.logprob));
  CHECK_THROWS_AS(position_logprobs(logits, 3, 1), InputError);
  CHECK_THROWS_AS(position_logprobs(logits, -1, 1), InputError);
}
