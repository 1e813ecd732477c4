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
