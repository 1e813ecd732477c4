// Perplexity against the PyTorch reference (testdata/models/tools/make_oracle.py computes the same
// llama.cpp-method figure with its own encoder and forward pass), window arithmetic and KL.
#include "core/error.hpp"
#include "eval/perplexity.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace optkit;
using namespace optkit::eval;

namespace {

PerplexityOptions
tiny(std::int64_t ctx, std::int64_t stride, std::int64_t windows) {
  PerplexityOptions o;
  o.model = test::testdata_dir() / "models" / "tiny-base";
  o.data = test::testdata_dir() / "corpora" / "english.heldout.txt";
  o.ctx = ctx;
  o.stride = stride;
  o.max_windows = windows;
  o.threads = 2;
  return o;
}

} // namespace

TEST_CASE("perplexity matches the reference implementation of the same method") {
  const auto oracle =
      nlohmann::json::parse(test::read_text(test::testdata_dir() / "models" / "tiny-base" / "oracle_perplexity.json"));
  const auto r = measure_perplexity(tiny(64, 0, 4));
  CHECK(r.text_tokens == oracle["text_tokens"].get<std::int64_t>());
  CHECK(r.scored_tokens == oracle["scored_tokens"].get<std::int64_t>());
  CHECK(r.perplexity == doctest::Approx(oracle["perplexity"].get<double>()).epsilon(1e-4));
  CHECK(r.windows == 4);
  CHECK(r.method.find("BOS replacing each window's first token") != std::string::npos);
  CHECK(r.bits_per_byte > 0.5);
  CHECK(r.bits_per_byte < 3.0);
  CHECK_FALSE(r.kl.has_value());
}

TEST_CASE("a short stride scores the tail of each window so every token is scored once") {
  const auto r = measure_perplexity(tiny(64, 16, 10));
  CHECK(r.scored_tokens == 10 * 16);
  CHECK(r.method.find("scoring positions 48..63") != std::string::npos);
}

TEST_CASE("KL of a model against itself is zero with full agreement") {
  auto o = tiny(32, 0, 3);
  o.kl_base = o.model;
  const auto r = measure_perplexity(o);
  REQUIRE(r.kl.has_value());
  CHECK(r.kl->kl_mean == doctest::Approx(0.0).epsilon(1e-12));
  CHECK(r.kl->top1_agreement == 1.0);
  CHECK(r.kl->delta_p_p01 == doctest::Approx(0.0));
  CHECK(r.kl->base_perplexity == doctest::Approx(r.perplexity));
}

TEST_CASE("windows that do not fit are refused with the flag to change") {
  CHECK_THROWS_WITH_AS(measure_perplexity(tiny(2048, 0, 0)), doctest::Contains("max_position_embeddings"), InputError);
  CHECK_THROWS_WITH_AS(measure_perplexity(tiny(64, 128, 0)), doctest::Contains("--stride 128 exceeds --ctx 64"),
                       InputError);
  auto o = tiny(1000, 0, 0);
  test::ScratchDir dir;
  test::write_text(dir / "short.txt", "only a few words");
  o.data = dir / "short.txt";
  CHECK_THROWS_WITH_AS(measure_perplexity(o), doctest::Contains("fewer than one --ctx window"), InputError);
}
