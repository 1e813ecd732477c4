// The perf database's lookup ladder: a measured point verbatim, interpolation between points in
// utilization space, extrapolation beyond them, roofline where nothing was measured; and the
// loader's one-line errors for malformed tables.
#include "core/error.hpp"
#include "perf/perf_database.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit;
using namespace optkit::perf;

namespace {

SystemSpec
h100_like() {
  return load_system(test::testdata_dir().parent_path() / "profiles", "h100_sxm");
}

double
gemm_sol(const SystemSpec& s, double m, double n, double k) {
  return speed_of_light_us(gemm_cost(m, n, k, 2, 2), s.peak_flops("bf16"), s.memory_bandwidth_gbs * 1e9);
}

} // namespace

TEST_CASE("utilization grid: exact, interpolated, extrapolated") {
  UtilizationGrid grid;
  grid.add(1, 0, 10.0, 5.0);    // utilization 0.5
  grid.add(100, 0, 40.0, 32.0); // utilization 0.8
  grid.finish();
  const GridAnswer exact = grid.query(100, 0);
  CHECK(exact.source == measured);
  CHECK(exact.measured_us == 40.0);
  const GridAnswer mid = grid.query(10, 0); // halfway in log space
  CHECK(mid.source == interpolated);
  CHECK(mid.utilization == doctest::Approx(0.65));
  const GridAnswer beyond = grid.query(1000, 0);
  CHECK(beyond.source == extrapolated);
  CHECK(beyond.utilization == doctest::Approx(0.8));
}

TEST_CASE("utilization grid: two axes, and holes fall back to the nearest point") {
  UtilizationGrid grid;
  grid.add(1, 100, 10, 2);    // 0.2
  grid.add(1, 1000, 10, 4);   // 0.4
  grid.add(10, 100, 10, 6);   // 0.6
  grid.add(10, 1000, 10, 8);  // 0.8
  grid.add(100, 1000, 10, 9); // (100, 100) missing
  grid.finish();
  const GridAnswer centre = grid.query(std::sqrt(10.0), std::sqrt(1e5));
  CHECK(centre.source == interpolated);
  CHECK(centre.utilization == doctest::Approx(0.5));
  const GridAnswer hole = grid.query(50, 150);
  CHECK(hole.source == extrapolated);
  CHECK(hole.utilization == doctest::Approx(0.6)); // (10, 100) is nearest
}

TEST_CASE("GEMM lookups climb the ladder") {
  const SystemSpec system = h100_like();
  PerfDatabase db(system);
  db.add_table(perf_tables()[0], "kind,m,n,k,latency_us\nbf16,1,8192,8192,50\nbf16,64,8192,8192,60\n", "gemm.csv");
  db.finish();
  const Estimate exact = db.gemm("bf16", 64, 8192, 8192);
  CHECK(exact.sources == measured);
  CHECK(exact.us == 60);
  const Estimate between = db.gemm("bf16", 8, 8192, 8192);
  CHECK(between.sources == interpolated);
  CHECK(between.us > 50);
  CHECK(between.us < 60);
  const Estimate beyond = db.gemm("bf16", 4096, 8192, 8192);
  CHECK(beyond.sources == extrapolated);
  const double util_at_64 = gemm_sol(system, 64, 8192, 8192) / 60.0;
  CHECK(beyond.us == doctest::Approx(gemm_sol(system, 4096, 8192, 8192) / util_at_64));
  // A neighbouring shape borrows the curve (extrapolated); a far one and another kind: the
  // fallback, labelled calibrated since the system file carries fitted efficiencies.
  CHECK(db.gemm("bf16", 64, 7168, 8192).sources == extrapolated);
  CHECK(db.gemm("bf16", 64, 1024, 8192).sources == calibrated);
  CHECK(db.gemm("fp8", 64, 8192, 8192).sources == calibrated);
}

TEST_CASE("roofline fallback uses the documented default efficiencies") {
  SystemSpec system = h100_like();
  system.efficiency = DefaultEfficiency{}; // the built-in defaults, labelled roofline
  const PerfDatabase empty(system);
  // Memory-bound decode GEMM: weights / (bandwidth × memory efficiency) + kernel overhead.
  const Estimate small = empty.gemm("bf16", 1, 8192, 8192);
  const double bytes = 8192.0 * 8192 * 2 + 8192 * 2 + 8192 * 2;
  CHECK(small.us == doctest::Approx(bytes / (3350e9 * 0.8) * 1e6 + 4.0));
  CHECK(small.sources == roofline);
  // Compute-bound prefill GEMM: FLOPs / (peak × GEMM efficiency) + overhead.
  const Estimate big = empty.gemm("bf16", 8192, 8192, 8192);
  CHECK(big.us == doctest::Approx(2.0 * 8192 * 8192 * 8192 / (989.4e12 * 0.7) * 1e6 + 4.0));
  // fp8 runs at twice the bf16 rate on Hopper.
  CHECK(empty.gemm("fp8", 8192, 8192, 8192).us < big.us * 0.55);
  // All-reduce: ring traffic 2(n-1)/n × bytes over the per-direction link, plus latency.
  const Estimate ring = empty.collective(CollectiveOp::all_reduce, 8, 1e8);
  CHECK(ring.us == doctest::Approx(2.0 * 7 / 8 * 1e8 / (450e9 * 0.8) * 1e6 + 8));
  CHECK(empty.collective(CollectiveOp::all_reduce, 1, 1e8).us == 0);
}

TEST_CASE("malformed tables name the file and row") {
  const SystemSpec system = h100_like();
  PerfDatabase db(system);
  CHECK_THROWS_WITH_AS(db.add_table(perf_tables()[0], "kind,m,n,k\n", "p/gemm.csv"),
                       doctest::Contains("p/gemm.csv:1: header must be"), InputError);
  CHECK_THROWS_WITH_AS(db.add_table(perf_tables()[0], "kind,m,n,k,latency_us\n# comment\nbf16,1,2,3,abc\n", "g.csv"),
                       doctest::Contains("g.csv:3: latency_us \"abc\" is not a positive number"), InputError);
  CHECK_THROWS_WITH_AS(db.add_table(perf_tables()[0], "kind,m,n,k,latency_us\nbf17,1,2,3,4\n", "g.csv"),
                       doctest::Contains("g.csv:2: kind \"bf17\""), InputError);
  CHECK_THROWS_WITH_AS(db.add_table(perf_tables()[0], "kind,m,n,k,latency_us\nbf16,1,2,3\n", "g.csv"),
                       doctest::Contains("g.csv:2: 4 fields, expected 5"), InputError);
  CHECK_THROWS_WITH_AS(db.add_table(perf_tables()[4], "op,gpus,bytes,latency_us\nall_reduce,1,100,5\n", "c.csv"),
                       doctest::Contains("c.csv:2: a collective needs at least 2 gpus"), InputError);
  CHECK_THROWS_WITH_AS(db.add_table(perf_tables()[4], "op,gpus,bytes,latency_us\np2p,4099400000,100,5\n", "c.csv"),
                       doctest::Contains("c.csv:2: gpus \"4099400000\" must be a whole number up to 10^9"), InputError);
  CHECK_THROWS_AS(db.add_table(perf_tables()[0], "kind,m,n,k,latency_us\nbf16,1.5,2,3,4\n", "g.csv"), InputError);
  CHECK_THROWS_WITH_AS(db.add_table(perf_tables()[5], "", "m.csv"), doctest::Contains("m.csv: empty table"),
                       InputError);
}

TEST_CASE("a database folder loads every table present") {
  const SystemSpec system = h100_like();
  test::ScratchDir dir;
  test::write_text(dir.path() / "memory.csv", "bytes,latency_us\n1000000,5\n100000000,40\n");
  test::write_text(dir.path() / "attention_decode.csv",
                   "kv_dtype,heads,kv_heads,head_dim,batch,kv_len,latency_us\nbf16,8,1,128,1,1024,9\n"
                   "bf16,8,1,128,8,1024,15\nbf16,8,1,128,1,4096,20\nbf16,8,1,128,8,4096,50\n");
  const PerfDatabase db = PerfDatabase::load(dir.path(), system);
  CHECK(db.points() == 6);
  CHECK(db.memory(1e6).us == 5);
  CHECK(db.attention_decode("bf16", 8, 1, 128, 8, 4096).us == 50);
  CHECK(db.attention_decode("bf16", 8, 1, 128, 4, 2048).sources == interpolated);
  CHECK(db.attention_decode("bf16", 16, 2, 128, 4, 2048).sources == calibrated);
}
