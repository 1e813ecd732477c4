#include "plan/profile_tables.hpp"

#include "core/error.hpp"
#include "perf/perf_database.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace optkit::plan {

namespace {

std::string
header(const char* file) {
  for (const auto& table : perf::perf_tables())
    if (std::string(table.file) == file)
      return fmt::format("{}\n", fmt::join(table.columns, ","));
  throw std::logic_error(std::string("no perf table ") + file);
}

} // namespace

MeasuredTables
measure_sweep(const ProfileSweep& sweep, OperatorTimer& timer,
              const std::function<void(std::size_t done, std::size_t total)>& progress) {
  MeasuredTables out;
  out.device = timer.device_name();
  const std::string origin = fmt::format("# measured by optkit plan profile on {}\n", out.device);
  std::string gemm, prefill, decode, memory;
  std::size_t done = 0;
  // Runs one measurement. A point the device refuses (no algorithm, out of memory) is recorded
  // and skipped, unless a small copy fails after it too: then the device itself is gone.
  auto attempt = [&](const std::string& what, const auto& measure) {
    if (progress)
      progress(done, sweep.points());
    ++done;
    try {
      measure();
      ++out.measured;
    } catch (const std::exception& e) {
      out.failures.push_back(what + ": " + e.what());
      try {
        timer.copy_us(1u << 20);
      } catch (const std::exception& probe) {
        throw RuntimeFailure(fmt::format("plan profile: the device stopped working at {} ({}; a 1 MiB copy then "
                                         "failed too: {})",
                                         what, e.what(), probe.what()));
      }
    }
  };
  for (const auto& g : sweep.gemms) {
    const auto what = fmt::format("gemm {} m={} n={} k={}", g.kind, g.m, g.n, g.k);
    if (!timer.supports_gemm(g.kind)) {
      out.failures.push_back(what + ": " + out.device + " has no such product");
      ++done;
      continue;
    }
    attempt(what, [&] {
      const double us = timer.gemm_us(g.kind, g.m, g.n, g.k);
      gemm += fmt::format("{},{},{},{},{:.3f}\n", g.kind, g.m, g.n, g.k, us);
      auto& best = out.best_tflops[g.kind];
      best = std::max(best, 2.0 * g.m * double(g.n) * g.k / us / 1e6);
    });
  }
  for (const auto& a : sweep.attention) {
    const auto what = fmt::format("attention_{} heads={} kv_heads={} head_dim={} batch={} length={}",
                                  a.prefill ? "prefill" : "decode", a.heads, a.kv_heads, a.head_dim, a.batch, a.length);
    attempt(what, [&] {
      const double us = a.prefill ? timer.attention_prefill_us(a.batch, a.length, a.heads, a.kv_heads, a.head_dim)
                                  : timer.attention_decode_us(a.batch, a.length, a.heads, a.kv_heads, a.head_dim);
      (a.prefill ? prefill : decode) +=
          fmt::format("{},{},{},{},{},{},{:.3f}\n", a.kv_dtype, a.heads, a.kv_heads, a.head_dim, a.batch, a.length, us);
    });
  }
  for (const auto bytes : sweep.copy_bytes)
    attempt(fmt::format("copy {} bytes", bytes), [&] {
      const double us = timer.copy_us(bytes);
      memory += fmt::format("{},{:.3f}\n", 2 * bytes, us); // read + written
      out.best_copy_gbs = std::max(out.best_copy_gbs, 2.0 * double(bytes) / us / 1e3);
    });
  if (progress)
    progress(done, sweep.points());
  for (const auto& [file, rows] : {std::pair<const char*, std::string*>{"gemm.csv", &gemm},
                                   {"attention_prefill.csv", &prefill},
                                   {"attention_decode.csv", &decode},
                                   {"memory.csv", &memory}})
    if (!rows->empty())
      out.csv[file] = origin + header(file) + *rows;
  return out;
}

nlohmann::json
to_json(const ProfileReport& r) {
  return {{"device", r.device},
          {"measured", r.measured},
          {"failures", r.failures},
          {"best_tflops", r.best_tflops},
          {"best_copy_gbs", r.best_copy_gbs}};
}

ProfileReport
profile_report_from_json(const nlohmann::json& j) {
  return {j.at("device").get<std::string>(), j.at("measured").get<std::size_t>(),
          j.at("failures").get<std::vector<std::string>>(), j.at("best_tflops").get<std::map<std::string, double>>(),
          j.at("best_copy_gbs").get<double>()};
}

} // namespace optkit::plan
