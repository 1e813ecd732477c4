// A decoder layer's output rows do not depend on the rows run beside them: a pass of 3,000 rows
// (the MLP in blocks of kMlpRowBlock) gives each sequence the very bits it gets alone, with and
// without a tap, on the mapped BF16 weights and on fp32 replacements. compress relies on it: the
// blocks keep its outputs byte for byte what one product over the pass gave.
// That holds on optkit's own AVX-512 kernels. Where OpenBLAS sgemm multiplies instead (portable
// builds, OPTKIT_CPU_BASELINE=1, CPUs without AVX-512), the bits are OpenBLAS's: its SkylakeX
// kernels give every row the same bits whatever M is, its Haswell and Zen kernels (what Debian's
// 0.3.21 picks on AVX2 CPUs and on Zen 4/5) do not (668 of 1,000 rows differ between M = 1,000
// alone and the same rows at offset 1,000 of M = 2,048), so there rows agree to fp32 rounding.
#include "runtime/decoder_pass.hpp"
#include "runtime/layerwise_model.hpp"
#include "runtime/panel_gemm.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace optkit;
using namespace optkit::runtime;

namespace {

// Counts what it sees, so that a pass with a tap is a different code path from one without.
class CountingTap final : public ActivationTap {
public:
  void observe(LinearInput, const float*, std::int64_t rows, std::int64_t, std::int64_t) override { seen += rows; }
  std::int64_t seen = 0;
};

std::vector<float>
embedded(const LayerwiseModel& model, std::int64_t length, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<TokenId> token(0, static_cast<TokenId>(model.config().vocab_size - 1));
  std::vector<TokenId> tokens(static_cast<std::size_t>(length));
  for (auto& t : tokens)
    t = token(rng);
  return model.embed(tokens);
}

void
check_rows_independent(LayerwiseModel& model, bool with_tap) {
  constexpr std::int64_t kLength = 1000, kSequences = 3; // 3,000 rows: two MLP blocks
  static_assert(kLength * kSequences > kMlpRowBlock && kLength <= kMlpRowBlock);
  const auto hidden = static_cast<std::size_t>(model.config().hidden_size);
  std::vector<float> together;
  std::vector<std::vector<float>> alone;
  for (unsigned s = 0; s < kSequences; ++s) {
    alone.push_back(embedded(model, kLength, s));
    together.insert(together.end(), alone.back().begin(), alone.back().end());
  }
  CountingTap tap;
  const std::vector<std::int64_t> lengths(kSequences, kLength);
  model.run_layer(1, lengths, together, with_tap ? &tap : nullptr);
  for (std::size_t s = 0; s < alone.size(); ++s) {
    model.run_layer(1, std::vector<std::int64_t>{kLength}, alone[s], with_tap ? &tap : nullptr);
    CAPTURE(s);
    const auto same_rows = together.begin() + static_cast<std::ptrdiff_t>(s * kLength * hidden);
    if (panel_gemm_supported(PanelProduct::bf16_split) && panel_gemm_supported(PanelProduct::f32)) {
      CHECK(std::equal(alone[s].begin(), alone[s].end(), same_rows));
      continue;
    }
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < alone[s].size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(alone[s][i] - same_rows[static_cast<std::ptrdiff_t>(i)])));
      scale = std::max(scale, static_cast<double>(std::fabs(alone[s][i])));
    }
    CHECK(worst <= 1e-5 * scale);
  }
  if (with_tap)
    CHECK(tap.seen == 2 * 4 * kLength * kSequences); // four linear inputs, the pass and the sequences alone
}

} // namespace

TEST_CASE("a layer's rows come out the same bits in a pass of many MLP blocks as alone") {
  LayerwiseModel model(test::testdata_dir() / "models" / "tiny-base", 2);
  for (const bool with_tap : {false, true}) {
    CAPTURE(with_tap);
    check_rows_independent(model, with_tap);
  }
  // fp32 weights in place of the mapped BF16 ones, as compress's calibrated pass has them.
  for (const auto& linear : kDecoderLinears) {
    const auto& w = model.linear(1, linear.name);
    model.replace_linear(1, linear.name, make_owned_dense_weight(dense_floats(w), w.rows(), w.cols()));
  }
  for (const bool with_tap : {false, true}) {
    CAPTURE(with_tap);
    check_rows_independent(model, with_tap);
  }
}
