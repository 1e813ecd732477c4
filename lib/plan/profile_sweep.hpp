// What `optkit plan profile` measures: the GEMM and attention sites that plans of the chosen
// models actually look up (collected by running the search against a recording database), each
// swept over token counts, batches and lengths, plus a copy-bandwidth ladder. Sites the local
// kernels cannot measure are listed with the reason, so the database says what it lacks.
#pragma once

#include "perf/system_spec.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::plan {

struct GemmPoint {
  std::string kind; // bf16, fp16, fp8, int8
  int m = 0, n = 0, k = 0;
};

struct AttentionPoint {
  bool prefill = true;
  std::string kv_dtype = "bf16";
  int heads = 0, kv_heads = 0, head_dim = 0;
  int batch = 0;
  int length = 0; // prefill: new tokens per sequence; decode: cached tokens
};

struct ProfileSweep {
  std::vector<GemmPoint> gemms;
  std::vector<AttentionPoint> attention;
  std::vector<std::uint64_t> copy_bytes;
  std::vector<std::string> skipped; // "gemm w4a16 n=… k=…: why", one per site left out
  std::size_t points() const { return gemms.size() + attention.size() + copy_bytes.size(); }
};

struct SweepOptions {
  std::vector<std::string> models;                       // presets or config.json paths; empty: every preset
  bool quick = false;                                    // a few points per site (a smoke run)
  double prefill_score_limit_bytes = 8.0 * (1ull << 30); // attention scores of one prefill point
  double decode_cache_limit_bytes = 16.0 * (1ull << 30); // K + V of one decode point
};

// InputError for an unknown model (naming the presets).
ProfileSweep build_profile_sweep(const SweepOptions& options, const perf::SystemSpec& system);

nlohmann::json to_json(const ProfileSweep& sweep);
ProfileSweep profile_sweep_from_json(const nlohmann::json& j);

// Points per table, e.g. "gemm 1650, attention_prefill 96, ...", for the dry run and the log.
std::string sweep_summary(const ProfileSweep& sweep);

} // namespace optkit::plan
