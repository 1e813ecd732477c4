// Perplexity against the PyTorch reference (testdata/models/tools/make_oracle.py computes
// llama-perplexity's protocol with its own encoder and a float64 forward pass; its ctx-128 figure,
// 38.7745, is also what llama-perplexity prints for the GGUF conversion, 38.7754), window
// arithmetic and KL.
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

TEST_CASE("perplexity is llama-perplexity's figure, computed by an independent reference") {
  const auto oracle =
      nlohmann::json::parse(test::read_text(test::testdata_dir() / "models" / "tiny-base" / "oracle_perplexity.json"));
  for (const auto& run : oracle["runs"]) {
    const auto ctx = run["ctx"].get<std::int64_t>();
    CAPTURE(ctx);
    const auto windows = run["windows"].get<std::int64_t>();
    // The whole file at ctx 128 (max_windows 0), the first windows at ctx 64.
    const auto r = measure_perplexity(tiny(ctx, 0, ctx == 128 ? 0 : windows));
    CHECK(r.text_tokens == oracle["text_tokens"].get<std::int64_t>()); // BOS first, as llama.cpp tokenizes
    CHECK(r.windows == windows);
    CHECK(r.scored_tokens == run["scored_tokens"].get<std::int64_t>()); // ctx/2 - 1 per window
    CHECK(r.perplexity == doctest::Approx(run["perplexity"].get<double>()).epsilon(1e-4));
    CHECK(r.perplexity_stderr == doctest::Approx(run["perplexity_stderr"].get<double>()).epsilon(1e-3));
    CHECK(r.method.find("llama-perplexity: BOS-first text") == 0);
    CHECK(r.method.find("BOS replacing each window's first token") != std::string::npos);
    CHECK(r.bits_per_byte > 0.5);
    CHECK(r.bits_per_byte < 3.0);
    CHECK_FALSE(r.kl.has_value());
    CHECK(r.window_nll.size() == static_cast<std::size_t>(windows));
  }
}

TEST_CASE("a stride is llama-perplexity's --ppl-stride: windows of ctx + stride/2, the last `stride` scored") {
  // llama-perplexity -c 64 --ppl-stride 16 decodes windows of 72 tokens every 16 and scores the
  // tokens after positions 55..70; the window's first token is not replaced by BOS.
  const auto r = measure_perplexity(tiny(64, 16, 10));
  CHECK(r.windows == 10);
  CHECK(r.scored_tokens == 10 * 16);
  CHECK(r.method.find("--ppl-stride 16") != std::string::npos);
  CHECK(r.method.find("windows of 72 tokens every 16") != std::string::npos);
  CHECK(r.method.find("positions 55..70") != std::string::npos);
  CHECK(r.method.find("BOS replacing") == std::string::npos);
  // Every window of the file: ceil((tokens - length) / stride).
  const auto all = measure_perplexity(tiny(64, 48, 0));
  CHECK(all.windows == (all.text_tokens - 88 + 47) / 48);
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
  CHECK_THROWS_WITH_AS(measure_perplexity(tiny(64, 64, 0)), doctest::Contains("--stride 64 is not below --ctx 64"),
                       InputError);
  auto o = tiny(1000, 0, 0);
  test::ScratchDir dir;
  test::write_text(dir / "short.txt", "only a few words");
  o.data = dir / "short.txt";
  CHECK_THROWS_WITH_AS(measure_perplexity(o), doctest::Contains("not enough for one window of 1000"), InputError);
}
