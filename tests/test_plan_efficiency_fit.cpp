// Plan's speed-of-light fallback against published measurements: the fit over
// profiles/calibration/published.yaml lowers the error on those figures, every system YAML carries
// exactly the fitted efficiencies (so the bundled figures cannot drift from their evidence), and
// the errors stay where they were when the calibration was committed.
#include "perf/perf_database.hpp"
#include "perf/roofline.hpp"
#include "perf/system_spec.hpp"
#include "plan/efficiency_fit.hpp"
#include "support/test_support.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <fstream>

using namespace optkit;
using namespace optkit::plan;

namespace {

// Mean absolute percentage errors when the calibration was committed (25 figures).
constexpr double kCommittedBefore = 23.1, kCommittedAfter = 12.3;

} // namespace

TEST_CASE("the fallback's efficiencies fitted to published static-batching figures") {
  const auto points =
      load_published_points(test::profiles_dir() / "calibration" / "published.yaml", test::profiles_dir());
  REQUIRE(points.points.size() >= 20);
  const auto fit = fit_efficiencies(points, perf::DefaultEfficiency{});
  REQUIRE(fit.after_rows.size() == fit.before_rows.size());
  std::string table = "system    model        tp batch   isl   osl metric        published   before    after\n";
  for (std::size_t i = 0; i < fit.after_rows.size(); ++i) {
    const auto& p = points.points[fit.after_rows[i].point];
    table += fmt::format("{:<9} {:<12} {:>2} {:>5} {:>5} {:>5} {:<12} {:>10.1f} {:>8.1f} {:>8.1f}\n", p.system, p.model,
                         p.tp, p.batch, p.isl, p.osl, fit.after_rows[i].metric, fit.after_rows[i].published,
                         fit.before_rows[i].predicted, fit.after_rows[i].predicted);
  }
  const double before = mean_absolute_percentage_error(fit.before_rows);
  const double after = mean_absolute_percentage_error(fit.after_rows);
  MESSAGE(table << fmt::format("MAPE: defaults {:.1f} %, fitted {:.1f} %", before, after));
  CHECK(before == doctest::Approx(kCommittedBefore).epsilon(0.01));
  CHECK(after <= kCommittedAfter + 0.5);
  CHECK(mean_absolute_log_error(fit.after_rows) < mean_absolute_log_error(fit.before_rows));

  // Every bundled system carries the fit, and says which points it came from.
  for (const auto& name : perf::list_systems(test::profiles_dir())) {
    CAPTURE(name);
    const auto system = perf::load_system(test::profiles_dir(), name);
    CHECK(system.efficiency.gemm == doctest::Approx(fit.after.gemm));
    CHECK(system.efficiency.attention == doctest::Approx(fit.after.attention));
    CHECK(system.efficiency.memory == doctest::Approx(fit.after.memory));
    CHECK(system.efficiency.communication == doctest::Approx(fit.after.communication));
    CHECK(system.efficiency.kernel_overhead_us == doctest::Approx(fit.after.kernel_overhead_us));
    CHECK(system.efficiency.calibrated == "profiles/calibration/published.yaml");
    // Estimates made without a measurement are labelled calibrated, not roofline.
    const perf::PerfDatabase none(system);
    CHECK(none.gemm("bf16", 64, 4096, 4096).sources == perf::calibrated);
  }
}

TEST_CASE("a points file names its errors") {
  const test::ScratchDir dir;
  const auto write = [&](const std::string& text) {
    std::ofstream(dir / "points.yaml") << text;
    return dir / "points.yaml";
  };
  CHECK_THROWS_WITH_AS(
      load_published_points(write("name: x\nsource: y\npoints:\n  - {system: h100_sxm, model: llama-3.1-8b, "
                                  "precision: bf16, tp: 1, batch: 1, isl: 128}\n"),
                            test::profiles_dir()),
      doctest::Contains("give output_tokens_per_s_per_gpu, ttft_ms or both"), InputError);
  CHECK_THROWS_WITH_AS(
      load_published_points(write("name: x\nsource: y\npoints:\n  - {system: h999, model: llama-3.1-8b, "
                                  "precision: bf16, tp: 1, batch: 1, isl: 128, ttft_ms: 5}\n"),
                            test::profiles_dir()),
      doctest::Contains("h999"), InputError);
  CHECK_THROWS_WITH_AS(
      load_published_points(write("name: x\nsource: y\npoints:\n  - {system: h100_sxm, model: llama-3.1-8b, "
                                  "precision: fp7, tp: 1, batch: 1, isl: 128, ttft_ms: 5}\n"),
                            test::profiles_dir()),
      doctest::Contains("fp7"), InputError);
  CHECK_THROWS_WITH_AS(
      load_published_points(write("name: x\nsource: y\npoints:\n  - {sytem: h100_sxm}\n"), test::profiles_dir()),
      doctest::Contains("points.yaml:4:"), InputError);
}
