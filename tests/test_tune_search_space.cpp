#include "core/error.hpp"
#include "tune/search_space.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::tune;

namespace {

const char* space_text = R"(name: s
parameters:
  - {name: batching, type: categorical, choices: [continuous, static], default: continuous}
  - {name: max_num_seqs, type: int, low: 1, high: 64, log: true, default: 16}
  - {name: budget, type: int, low: 256, high: 8192, step: 256, default: 2048, when: "batching=continuous"}
  - {name: wait_ms, type: float, low: 0, high: 50, step: 5, when: "batching=static"}
  - {name: fraction, type: float, low: 0.5, high: 0.95}
)";

std::string
error_of(const std::string& yaml) {
  try {
    parse_search_space(yaml, "space.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("search spaces parse parameters, defaults and conditions") {
  const auto s = parse_search_space(space_text, "space.yaml");
  REQUIRE(s.parameters.size() == 5);
  CHECK(s.parameters[1].log);
  CHECK(s.parameters[2].grid_step() == 256);
  CHECK(s.parameters[2].when_param == "batching");
  const auto defaults = s.defaults();
  CHECK_FALSE(defaults.has_value()); // fraction has none
  const auto completed = s.complete({{"batching", "static"}});
  CHECK(completed.contains("wait_ms"));
  CHECK_FALSE(completed.contains("budget"));
  CHECK(completed["max_num_seqs"] == 16);
  CHECK(completed["fraction"].get<double>() == doctest::Approx(0.725));
}

TEST_CASE("configurations are checked against the space") {
  const auto s = parse_search_space(space_text, "space.yaml");
  nlohmann::json ok = {{"batching", "continuous"}, {"max_num_seqs", 8}, {"budget", 512}, {"fraction", 0.9}};
  CHECK_NOTHROW(s.check(ok));
  auto off_grid = ok;
  off_grid["budget"] = 300;
  CHECK_THROWS_WITH_AS(s.check(off_grid), doctest::Contains("not on its grid"), InputError);
  auto inactive = ok;
  inactive["wait_ms"] = 5;
  CHECK_THROWS_WITH_AS(s.check(inactive), doctest::Contains("inactive"), InputError);
  auto missing = ok;
  missing.erase("budget");
  CHECK_THROWS_WITH_AS(s.check(missing), doctest::Contains("'budget' is active but has no value"), InputError);
  auto outside = ok;
  outside["fraction"] = 0.99;
  CHECK_THROWS_WITH_AS(s.check(outside), doctest::Contains("outside"), InputError);
  auto unknown = ok;
  unknown["threads"] = 2;
  CHECK_THROWS_WITH_AS(s.check(unknown), doctest::Contains("'threads' is not in search space"), InputError);
}

TEST_CASE("grids and external values follow steps, logs and choices") {
  const auto s = parse_search_space(space_text, "space.yaml");
  CHECK(s.parameters[0].grid(3).size() == 2);
  CHECK(s.parameters[2].grid(3).size() == 32);
  CHECK(s.parameters[1].grid(3).size() == 64);
  const auto floats = s.parameters[4].grid(4);
  REQUIRE(floats.size() == 4);
  CHECK(floats.back().get<double>() == doctest::Approx(0.95));
  CHECK(s.parameters[2].external(1000.0) == 1024);
  CHECK(s.parameters[2].external(99999.0) == 8192);
  CHECK(s.parameters[0].external(1.0) == "static");
  CHECK(s.parameters[0].internal("static") == 1.0);
  for (const auto& p : s.parameters)
    CHECK(p.grid_count(4) == p.grid(4).size());
}

TEST_CASE("a huge stepped range is counted without being built, and one past 2^53 steps is refused") {
  // 10^12 grid points: grid_size counts them (the fuzzer found it building them, out of memory).
  const auto big = parse_search_space("name: s\nparameters:\n  - {name: a, type: int, low: 0, high: 1000000000000}\n"
                                      "  - {name: b, type: float, low: 0, high: 1}\n",
                                      "space.yaml");
  CHECK(big.parameters[0].grid_count(3) == 1'000'000'000'001ULL);
  CHECK(big.grid_size(3) == 3'000'000'000'003ULL);
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: int, low: 0, high: 1e17}\n")
            .find("parameter 'a': (high − low) / step = 1e+17 steps is more than a grid can hold") !=
        std::string::npos);
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: float, low: 0, high: 1, step: 1e-17}\n")
            .find("more than a grid can hold") != std::string::npos);
}

TEST_CASE("bad spaces are refused with the file and what to change") {
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: int, low: 5, high: 2}\n")
            .find("space.yaml: parameter 'a': low 5 must be below high 2") != std::string::npos);
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: float, low: 0, high: 1, log: true}\n")
            .find("needs low > 0") != std::string::npos);
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: int, low: 0, high: 10, step: 3}\n")
            .find("not a multiple of step 3") != std::string::npos);
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: categorical}\n").find("non-empty 'choices'") !=
        std::string::npos);
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: int, low: 0, high: 4, when: \"b=x\"}\n"
                 "  - {name: b, type: categorical, choices: [x]}\n")
            .find("not a parameter listed before it") != std::string::npos);
  CHECK(error_of("name: s\nparameters:\n  - {name: b, type: categorical, choices: [x, y]}\n"
                 "  - {name: a, type: int, low: 0, high: 4, when: \"b=z\"}\n")
            .find("'z' is not one of b's choices") != std::string::npos);
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: int, low: 0, high: 4, default: 7}\n").find("outside") !=
        std::string::npos);
  // Schema errors carry the line and column.
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: integer, low: 0, high: 4}\n").find("space.yaml:3:") !=
        std::string::npos);
  CHECK(error_of("name: s\nparameters:\n  - {name: a, type: int, lo: 0, high: 4}\n").find("low") != std::string::npos);
}
