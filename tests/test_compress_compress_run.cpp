#include "compress/compress_run.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

using namespace optkit;

TEST_CASE("run_compress checks its own ranges before it touches a model or starts a child") {
  compress::CompressOptions options;
  options.model = "/nonexistent-model";
  options.trials = 0;
  CHECK_THROWS_WITH_AS(compress::run_compress(options, {}), doctest::Contains("--trials 0"), InputError);
  options.trials = 2;
  options.jobs = 0;
  CHECK_THROWS_WITH_AS(compress::run_compress(options, {}), doctest::Contains("--jobs 0"), InputError);
}

TEST_CASE("a compress result read back from its JSON writes the same JSON, and gives each metric's mean") {
  compress::CompressResult r;
  r.recipe = "int_w4a16";
  r.output = "/tmp/out";
  r.representative = 1;
  r.trials = {{0, true, "", {{"calibration_loss", 0.25}, {"compression_ratio", 3.5}}},
              {1, true, "", {{"calibration_loss", 0.2}, {"compression_ratio", 3.5}}},
              {2, false, "the worker was killed (SIGKILL)", nlohmann::json::object()}};
  r.summary = {{"calibration_loss", {{"mean", 0.225}, {"std", 0.035}, {"n", 2}}},
               {"compression_ratio", {{"mean", 3.5}, {"std", 0.0}, {"n", 2}}}};
  r.memory = {{"estimated_peak_bytes", 1 << 20}, {"max_memory", nullptr}};
  const nlohmann::json j = compress::to_json(r);
  const auto back = compress::compress_result_from_json(j, "compress.json");
  CHECK(compress::to_json(back) == j);
  CHECK(compress::summary_mean(back, "calibration_loss") == 0.225);
  CHECK_FALSE(compress::summary_mean(back, "seconds").has_value());
  nlohmann::json wrong = j;
  wrong["trials"][0]["succeeded"] = "yes";
  CHECK_THROWS_WITH_AS(compress::compress_result_from_json(wrong, "compress.json"),
                       doctest::Contains("compress.json: field /trials/0/succeeded"), InputError);
}
