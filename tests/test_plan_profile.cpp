// optkit plan profile without a GPU: the sweep covers exactly the sites the planner looks up (and
// names those it cannot measure), survives its JSON hand-off to the child, and the tables a
// timer's figures become load back as a perf database whose lookups return them as measured.
#include "core/error.hpp"
#include "perf/perf_database.hpp"
#include "plan/profile_sweep.hpp"
#include "plan/profile_tables.hpp"
#include "support/system_fixtures.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>

using namespace optkit;
using namespace optkit::perf;
using namespace optkit::plan;

namespace {

// A device model: affine in work, so every figure is known; fp8 unsupported, one shape refused.
class ModelTimer final : public OperatorTimer {
public:
  int calls = 0;
  bool refuse_everything = false;
  std::string device_name() const override { return "model GPU"; }
  bool supports_gemm(const std::string& kind) const override { return kind != "fp8"; }
  double gemm_us(const std::string&, int m, int n, int k) override {
    ++calls;
    if (refuse_everything || (n == 4096 && k == 14336 && m == 4096))
      throw std::runtime_error("out of memory");
    return 3.0 + 2.0 * m * double(n) * k / 500e6; // 500 TFLOP/s
  }
  double attention_prefill_us(int batch, int seq, int heads, int, int head_dim) override {
    ++calls;
    return 5.0 + 4.0 * batch * heads * double(seq) * seq * head_dim / 400e6;
  }
  double attention_decode_us(int batch, int kv_len, int, int kv_heads, int head_dim) override {
    ++calls;
    return 4.0 + 4.0 * batch * kv_heads * double(kv_len) * head_dim / 3e6; // 3 TB/s
  }
  double copy_us(std::uint64_t bytes) override {
    ++calls;
    if (refuse_everything)
      throw std::runtime_error("cudaErrorIllegalAddress");
    return 2.0 + 2.0 * double(bytes) / 3e6;
  }
};

bool
has_gemm(const ProfileSweep& sweep, const std::string& kind, int m, int n, int k) {
  return std::any_of(sweep.gemms.begin(), sweep.gemms.end(),
                     [&](const GemmPoint& g) { return g.kind == kind && g.m == m && g.n == n && g.k == k; });
}

} // namespace

TEST_CASE("the sweep measures the shapes plans look up, and lists what it cannot") {
  const auto system = test::h100_sxm();
  const auto sweep = build_profile_sweep({.models = {"llama-3.1-8b"}}, system);
  // Llama-3.1-8B: QKV (32 + 2·8)·128 = 6144 × 4096 at TP 1, 3072 at TP 2; down 4096 × 14336/4.
  for (const int m : {1, 16, 4096, 16384}) {
    CHECK(has_gemm(sweep, "bf16", m, 6144, 4096));
    CHECK(has_gemm(sweep, "fp8", m, 3072, 4096));
    CHECK(has_gemm(sweep, "int8", m, 4096, 3584));
  }
  CHECK_FALSE(has_gemm(sweep, "w4a16", 1, 6144, 4096)); // no kernel: listed as skipped instead
  CHECK(std::any_of(sweep.skipped.begin(), sweep.skipped.end(),
                    [](const std::string& s) { return s.starts_with("gemm w4a16 6144 4096: weight-only"); }));
  CHECK(std::any_of(sweep.skipped.begin(), sweep.skipped.end(),
                    [](const std::string& s) { return s.starts_with("attention_decode fp8 32 8 128"); }));
  bool decode_tp1 = false, prefill_tp8 = false;
  for (const auto& a : sweep.attention) {
    decode_tp1 |= !a.prefill && a.heads == 32 && a.kv_heads == 8 && a.head_dim == 128 && a.batch == 1;
    prefill_tp8 |= a.prefill && a.heads == 4 && a.kv_heads == 1;
    // Bounded memory per point: scores of a prefill, the K and V of a decode.
    if (a.prefill)
      CHECK(2.0 * a.batch * a.heads * double(a.length) * a.length <= 8.0 * (1ull << 30));
    else
      CHECK(4.0 * a.batch * a.kv_heads * double(a.length) * a.head_dim <= 16.0 * (1ull << 30));
  }
  CHECK(decode_tp1);
  CHECK(prefill_tp8);
  CHECK(sweep.copy_bytes.front() == (1u << 12));
  CHECK_THROWS_AS(build_profile_sweep({.models = {"llama-9b"}}, system), InputError);

  const auto again = profile_sweep_from_json(to_json(sweep));
  CHECK(again.points() == sweep.points());
  CHECK(again.gemms.back().n == sweep.gemms.back().n);
  CHECK(again.attention.back().length == sweep.attention.back().length);
  CHECK(again.skipped == sweep.skipped);
  const auto quick = build_profile_sweep({.models = {"llama-3.1-8b"}, .quick = true}, system);
  CHECK(quick.points() * 3 < sweep.points());
}

TEST_CASE("measured tables load back as a perf database that returns the figures as measured") {
  const auto system = test::h100_sxm();
  const auto sweep = build_profile_sweep({.models = {"llama-3.1-8b"}, .quick = true}, system);
  ModelTimer timer;
  std::size_t last_done = 0;
  const auto tables = measure_sweep(sweep, timer, [&](std::size_t done, std::size_t) { last_done = done; });
  CHECK(last_done == sweep.points());
  // fp8 is unsupported on the model device and one GEMM ran out of memory: both recorded.
  CHECK(std::any_of(tables.failures.begin(), tables.failures.end(),
                    [](const std::string& f) { return f.find("gemm fp8") == 0; }));
  CHECK(std::any_of(tables.failures.begin(), tables.failures.end(),
                    [](const std::string& f) { return f == "gemm bf16 m=4096 n=4096 k=14336: out of memory"; }));
  CHECK(tables.measured + tables.failures.size() == sweep.points());
  CHECK(tables.best_tflops.at("bf16") == doctest::Approx(500).epsilon(0.01));
  CHECK(tables.best_copy_gbs == doctest::Approx(3000).epsilon(0.01));

  test::ScratchDir dir;
  for (const auto& [file, text] : tables.csv)
    test::write_text(dir / file, text);
  const auto db = PerfDatabase::load(dir.path(), system);
  CHECK(db.points() == tables.measured);
  const Estimate exact = db.gemm("bf16", 256, 6144, 4096);
  CHECK(exact.sources == measured);
  CHECK(exact.us == doctest::Approx(3.0 + 2.0 * 256 * 6144 * 4096 / 500e6).epsilon(1e-4)); // tables keep nanoseconds
  CHECK(db.gemm("bf16", 100, 6144, 4096).sources == interpolated);
  CHECK(db.gemm("fp8", 256, 6144, 4096).sources == calibrated); // never measured: the fitted fallback
  const Estimate decode = db.attention_decode("bf16", 32, 8, 128, 16, 4096);
  CHECK(decode.sources == measured);
  CHECK(decode.us == doctest::Approx(4.0 + 4.0 * 16 * 8 * 4096.0 * 128 / 3e6).epsilon(1e-4)); // tables keep nanoseconds
  CHECK(db.memory(2.0 * (1u << 20)).sources == measured);
}

TEST_CASE("a device that stops working stops the profile at once") {
  const auto sweep = build_profile_sweep({.models = {"llama-3.1-8b"}, .quick = true}, test::h100_sxm());
  ModelTimer timer;
  timer.refuse_everything = true;
  CHECK_THROWS_WITH_AS(measure_sweep(sweep, timer), doctest::Contains("a 1 MiB copy then failed too"), RuntimeFailure);
  CHECK(timer.calls == 2); // the first point, then the probe
}
