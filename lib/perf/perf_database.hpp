// The operator performance database of one system (profiles/perf/<system>/): measured latencies
// of matrix products, prefill and decode attention, MoE layers, collectives and memory-bound
// kernels, as CSV tables that `optkit plan profile` writes. Lookups climb one ladder: a measured
// point verbatim → interpolated between points → extrapolated (speed of light / nearest measured
// utilization) → roofline with default efficiencies when nothing was measured for the shape.
#pragma once

#include "perf/estimate.hpp"
#include "perf/roofline.hpp"
#include "perf/system_spec.hpp"
#include "perf/utilization_grid.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace optkit::perf {

// The tables and their columns, in the order a file's header must list them.
struct PerfTable {
  const char* file;
  std::vector<const char*> columns;
};
const std::vector<PerfTable>& perf_tables();

// The (table, key) sites lookups asked for, e.g. {"gemm", {"bf16", "6144", "4096"}}: the shapes
// `optkit plan profile` measures so that later plans find them measured.
using PerfSites = std::set<std::pair<std::string, std::vector<std::string>>>;

// Lookups are safe from many threads at once (a simulator or tuner prices steps concurrently);
// loading, add_* and finish() are not, and happen before the first lookup.
class PerfDatabase {
public:
  explicit PerfDatabase(const SystemSpec& system) : m_system(&system) {}

  // Reads every table present in `dir` (a missing table means "not measured"); a malformed row →
  // InputError naming the file and row.
  static PerfDatabase load(const std::filesystem::path& dir, const SystemSpec& system);

  std::size_t points() const { return m_points; }
  const std::filesystem::path& directory() const { return m_directory; }

  // `kind` as gemm_kind(): bf16, fp16, fp8, int8, w8a16, w4a16.
  Estimate gemm(const std::string& kind, double m, double n, double k) const;
  Estimate attention_prefill(const std::string& kv_dtype, int heads, int kv_heads, int head_dim, double batch,
                             double seq, double prefix) const;
  Estimate attention_decode(const std::string& kv_dtype, int heads, int kv_heads, int head_dim, double batch,
                            double kv_len, double tokens_per_sequence = 1) const;
  // One MoE layer on one GPU: `tokens` reach it, each routed to `topk` of its `experts` experts,
  // `inter` wide; `imbalance` = hottest GPU's load over the mean (power-law routing skew).
  Estimate moe(const std::string& kind, int hidden, int inter, int topk, int experts, double tokens,
               double imbalance) const;
  Estimate collective(CollectiveOp op, int gpus, double bytes) const;
  Estimate memory(double bytes) const;

  // Parses one table's CSV text (named `source` in errors) into the database; call finish() after.
  void add_table(const PerfTable& table, const std::string& text, const std::string& source);
  // Adds one measured point (the loader and tests use it); call finish() after the last.
  void add_point(const std::string& table, const std::vector<std::string>& key, double x, double y, double latency_us);
  void finish();
  // Every later lookup adds its GEMM, attention or MoE site to `sink` (nullptr stops recording).
  void record_sites(PerfSites* sink) { m_sites = sink; }

private:
  struct GemmSite {
    const UtilizationGrid* grid = nullptr;
    bool borrowed = false; // the curve of a neighbouring (n, k)
  };
  const SystemSpec* m_system;
  std::filesystem::path m_directory;
  std::size_t m_points = 0;
  std::unordered_map<std::string, UtilizationGrid> m_grids; // "table|key fields"
  // GEMM shapes without a curve of their own → the neighbouring curve they borrow, found once.
  struct NearestGemmCache {
    std::shared_mutex mutex;
    std::unordered_map<std::string, GemmSite> sites;
  };
  std::unique_ptr<NearestGemmCache> m_nearest_gemm = std::make_unique<NearestGemmCache>();
  PerfSites* m_sites = nullptr;
  std::unique_ptr<std::mutex> m_sites_mutex = std::make_unique<std::mutex>();

  void record_site(const char* table, const std::vector<std::string>& fields) const;

  const UtilizationGrid* grid(const std::string& key) const;
  // The measured grid of a site (nullptr: none), recording the site when recording. `key()`
  // builds its fields only then, so roofline-only lookups build no strings.
  template <typename KeyFields> const UtilizationGrid* site_grid(const char* table, const KeyFields& key) const;
  GemmSite gemm_site(const std::string& kind, double n, double k) const;
  Estimate answer(const UtilizationGrid* grid, double x, double y, double speed_of_light_us, OpClass op_class,
                  const OpCost& cost, double peak) const;
  Estimate attention(const char* table, const std::string& kv_dtype, int heads, int kv_heads, int head_dim,
                     double batch, double length, const OpCost& cost, OpClass op_class, bool shape_measured) const;
  double point_speed_of_light(const std::string& table, const std::vector<std::string>& key, double x, double y) const;
};

// Weight and activation bytes of a GEMM kind.
std::pair<double, double> gemm_kind_bytes(const std::string& kind);

} // namespace optkit::perf
