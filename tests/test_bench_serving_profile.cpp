#include "bench/prompt_synthesis.hpp"
#include "bench/serving_profile.hpp"
#include "core/random_source.hpp"

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit::bench;

TEST_CASE("a profile's lengths follow its distributions, and the plan is seeded") {
  const auto profile = parse_serving_profile(R"(name: t
mix:
  - {name: short, weight: 3, input_tokens: {distribution: uniform, min: 10, max: 20}, output_tokens: {distribution: fixed, mean: 8}}
  - {name: long, weight: 1, input_tokens: {distribution: lognormal, mean: 300, stddev: 100}, output_tokens: {distribution: empirical, values: [5, 7]}}
shared_prefix_tokens: 4
)",
                                             "t.yaml");
  const auto plan = plan_requests(profile, 40000, 5);
  std::size_t shorts = 0;
  double long_sum = 0, long_sq = 0;
  for (const auto& r : plan) {
    if (r.class_index == 0) {
      ++shorts;
      REQUIRE(r.input_tokens >= 10);
      REQUIRE(r.input_tokens <= 20);
      REQUIRE(r.output_tokens == 8);
    } else {
      long_sum += static_cast<double>(r.input_tokens);
      long_sq += static_cast<double>(r.input_tokens * r.input_tokens);
      REQUIRE((r.output_tokens == 5 || r.output_tokens == 7));
    }
  }
  CHECK(static_cast<double>(shorts) / 40000.0 == doctest::Approx(0.75).epsilon(0.02));
  const double longs = static_cast<double>(40000 - shorts);
  const double mean = long_sum / longs;
  CHECK(mean == doctest::Approx(300).epsilon(0.02));
  CHECK(std::sqrt(long_sq / longs - mean * mean) == doctest::Approx(100).epsilon(0.05));
  const auto again = plan_requests(profile, 100, 5);
  for (std::size_t i = 0; i < again.size(); ++i)
    CHECK(again[i].input_tokens == plan[i].input_tokens);
}

TEST_CASE("a padded batch's lengths are the expected longest of its requests") {
  // Uniform integers on [10, 20] (11 values): E[max of B draws] = 20 − Σ_{k=10}^{19} ((k − 9)/11)^B.
  const auto profile = parse_serving_profile(R"(name: t
input_tokens: {distribution: uniform, min: 10, max: 20}
output_tokens: {distribution: fixed, mean: 8}
)",
                                             "t.yaml");
  for (int batch : {1, 4, 16}) {
    double expected = 20;
    for (int k = 10; k <= 19; ++k)
      expected -= std::pow((k - 9) / 11.0, batch);
    const auto padded = padded_batch_lengths(profile, batch, 3, 20000);
    CAPTURE(batch);
    CHECK(padded.input_tokens == doctest::Approx(expected).epsilon(0.01));
    CHECK(padded.output_tokens == 8);
  }
}

TEST_CASE("profile errors name the file, the place and the fix") {
  const auto message = [](const std::string& yaml) {
    try {
      (void)parse_serving_profile(yaml, "p.yaml");
    } catch (const optkit::InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(message("name: x\ninput_tokens: {distribution: fixd, mean: 3}\noutput_tokens: {distribution: fixed, mean: "
                "3}\n")
            .find("p.yaml:2") != std::string::npos);
  CHECK(message("name: x\ninput_tokens: {distribution: uniform, min: 9}\noutput_tokens: {distribution: fixed, mean: "
                "3}\n")
            .find("min <= max") != std::string::npos);
  CHECK(message("name: x\n").find("input_tokens and output_tokens are required") != std::string::npos);
  CHECK(message("name: x\ninput_tokens: {distribution: fixed, mean: 3}\noutput_tokens: {distribution: fixed, mean: "
                "3}\nmix: []\n")
            .find("not both") != std::string::npos);
  // A bound past what a length can be (the fuzzer's 1e107: undefined as an integer) or a mean past it.
  CHECK(message("name: x\ninput_tokens: {distribution: uniform, min: 1, max: 8.8e107}\noutput_tokens: {distribution: "
                "fixed, mean: 3}\n")
            .find("'max' must be between 0 and 1000000000 tokens") != std::string::npos);
  CHECK(message("name: x\ninput_tokens: {distribution: normal, mean: 1e300, stddev: 1}\noutput_tokens: "
                "{distribution: fixed, mean: 3}\n")
            .find("'mean' must be between") != std::string::npos);
}

TEST_CASE("every bundled profile loads") {
  const auto names = list_serving_profiles();
  CHECK(names.size() >= 3);
  for (const auto& name : names) {
    CAPTURE(name);
    CHECK(resolve_serving_profile(name).name == name);
  }
  CHECK_THROWS_WITH_AS(resolve_serving_profile("nope"), doctest::Contains("chat-small"), optkit::InputError);
}

TEST_CASE("a profile written by optkit plan carries default SLOs and the planned rate") {
  const auto profile = parse_serving_profile(R"(name: plan-x-vllm
model: meta-llama/Llama-3.1-8B-Instruct
input_tokens: {distribution: fixed, mean: 1000}
output_tokens: {distribution: fixed, mean: 100}
slo: ["ttft:mean<=1000ms", "tpot:mean<=50ms"]
load: {concurrency: 64, request_rate: 12.5}
predicted: {configuration: "TP1", ttft_ms: 210.5, tpot_ms: 12.25, sources: "roofline"}
)",
                                             "plan.yaml");
  REQUIRE(profile.slos.size() == 2);
  CHECK(profile.slos[0].is_mean());
  CHECK(profile.slos[1].threshold_s == doctest::Approx(0.05));
  CHECK(profile.planned_rate == doctest::Approx(12.5));
  CHECK_THROWS_WITH_AS(parse_serving_profile("name: x\ninput_tokens: {distribution: fixed, mean: 3}\noutput_tokens: "
                                             "{distribution: fixed, mean: 3}\nslo: [\"ttft<=1s\"]\n",
                                             "p.yaml"),
                       doctest::Contains("p.yaml: slo: SLO 'ttft<=1s'"), optkit::InputError);
}

TEST_CASE("shared prefix groups: each request starts with one of K system prompts, drawn evenly and seeded") {
  const auto profile = parse_serving_profile(R"(name: t
shared_prefix_tokens: 40
shared_prefix_groups: 4
input_tokens: {distribution: fixed, mean: 60}
output_tokens: {distribution: fixed, mean: 8}
)",
                                             "t.yaml");
  CHECK(profile.shared_prefix_groups == 4);
  const auto plan = plan_requests(profile, 400, 3);
  std::vector<int> per_group(4, 0);
  for (const auto& r : plan) {
    REQUIRE(r.prefix_group < 4);
    ++per_group[r.prefix_group];
  }
  for (const int n : per_group)
    CHECK(n > 60); // 100 expected each
  CHECK(plan_requests(profile, 400, 3)[7].prefix_group == plan[7].prefix_group);
  // The prompts: each group's shared text first, different groups different texts.
  const auto codec = local_codec(optkit::test::tiny_base().string());
  PromptSynthesizer prompts(*codec, default_corpus_text(), 40, 1, {}, 4);
  const auto a = prompts.make(60, 2), b = prompts.make(60, 2), c = prompts.make(60, 3);
  const auto common = [](const std::string& x, const std::string& y) {
    std::size_t n = 0;
    while (n < x.size() && n < y.size() && x[n] == y[n])
      ++n;
    return n;
  };
  CHECK(common(a.text, b.text) > 100); // 40 shared tokens, several characters each
  CHECK(common(a.text, c.text) < 20);
  CHECK(a.tokens == 60);
  CHECK_THROWS_WITH_AS(parse_serving_profile("name: t\nshared_prefix_groups: 2\ninput_tokens: {distribution: fixed, "
                                             "mean: 9}\noutput_tokens: {distribution: fixed, mean: 8}\n",
                                             "g.yaml"),
                       doctest::Contains("g.yaml: shared_prefix_groups needs shared_prefix_tokens"),
                       optkit::InputError);
}

TEST_CASE("request cancellation: a seeded share of the plan is abandoned after the profile's delay") {
  const auto profile = parse_serving_profile(R"(name: t
cancel_fraction: 0.25
cancel_after_s: 1.5
input_tokens: {distribution: fixed, mean: 60}
output_tokens: {distribution: fixed, mean: 8}
)",
                                             "t.yaml");
  const auto plan = plan_requests(profile, 800, 5);
  std::size_t cancelled = 0;
  for (const auto& r : plan) {
    CHECK((r.cancel_after_s == -1 || r.cancel_after_s == 1.5));
    cancelled += r.cancel_after_s >= 0 ? 1u : 0u;
  }
  CHECK(cancelled > 150); // 200 expected
  CHECK(cancelled < 250);
  CHECK_THROWS_WITH_AS(parse_serving_profile("name: t\ncancel_fraction: 1.5\ninput_tokens: {distribution: fixed, "
                                             "mean: 9}\noutput_tokens: {distribution: fixed, mean: 8}\n",
                                             "c.yaml"),
                       doctest::Contains("cancel_fraction"), optkit::InputError);
}

TEST_CASE("conversations: turns drawn per conversation, the plan's count exact, later questions without the "
          "prefix") {
  const auto profile = parse_serving_profile(R"(name: t
api: chat
shared_prefix_tokens: 100
input_tokens: {distribution: uniform, min: 110, max: 130}
output_tokens: {distribution: fixed, mean: 8}
conversation:
  turns: {distribution: uniform, min: 2, max: 4}
  think_time_s: 1.5
)",
                                             "t.yaml");
  CHECK(profile.multi_turn());
  CHECK(profile.think_time_s == 1.5);
  const auto conversations = plan_conversations(profile, 3001, 9);
  std::size_t total = 0;
  std::vector<std::size_t> sizes(5, 0);
  for (std::size_t c = 0; c < conversations.size(); ++c) {
    const auto& turns = conversations[c];
    total += turns.size();
    if (c + 1 < conversations.size()) { // the last one is cut to the count
      REQUIRE(turns.size() >= 2);
      REQUIRE(turns.size() <= 4);
      ++sizes[turns.size()];
    }
    CHECK(turns[0].input_tokens >= 110);
    CHECK(turns[0].input_tokens <= 130);
    for (std::size_t k = 1; k < turns.size(); ++k) {
      CHECK(turns[k].input_tokens >= 10);
      CHECK(turns[k].input_tokens <= 30);
    }
  }
  CHECK(total == 3001);
  for (std::size_t turns = 2; turns <= 4; ++turns) // about a third each
    CHECK(static_cast<double>(sizes[turns]) / static_cast<double>(conversations.size() - 1) ==
          doctest::Approx(1.0 / 3).epsilon(0.15));
  const auto again = plan_conversations(profile, 3001, 9);
  REQUIRE(again.size() == conversations.size());
  for (std::size_t c = 0; c < again.size(); ++c)
    CHECK(again[c].size() == conversations[c].size());
  CHECK_FALSE(parse_serving_profile("name: t\ninput_tokens: {distribution: fixed, mean: 9}\noutput_tokens: "
                                    "{distribution: fixed, mean: 8}\n",
                                    "s.yaml")
                  .multi_turn());
  CHECK_THROWS_WITH_AS(parse_serving_profile("name: t\ninput_tokens: {distribution: fixed, mean: 9}\noutput_tokens: "
                                             "{distribution: fixed, mean: 8}\nconversation: {turns: {distribution: "
                                             "fixed, mean: 3}}\n",
                                             "m.yaml"),
                       doctest::Contains("m.yaml: conversation: needs api: chat"), optkit::InputError);
}
