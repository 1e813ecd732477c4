#include "plan/profile_sweep.hpp"

#include "core/error.hpp"
#include "perf/model_arch.hpp"
#include "perf/perf_database.hpp"
#include "plan/search.hpp"

#include <fmt/format.h>
#include <map>

namespace optkit::plan {

namespace {

// Precisions whose matrix products the local kernels can time (KV cache in BF16: the attention
// kernels are BF16), plus int4 weights so their sites are listed as skipped rather than forgotten.
const std::vector<perf::ServingPrecision>&
swept_precisions() {
  static const std::vector<perf::ServingPrecision> precisions = {
      {perf::Precision::bf16, perf::Precision::bf16, perf::Precision::bf16},
      {perf::Precision::fp8, perf::Precision::fp8, perf::Precision::bf16},
      {perf::Precision::int8, perf::Precision::int8, perf::Precision::bf16},
      {perf::Precision::int4, perf::Precision::bf16, perf::Precision::bf16},
      {perf::Precision::fp8, perf::Precision::fp8, perf::Precision::fp8},
  };
  return precisions;
}

// Runs the planner's own search for each model and precision against an empty database that
// records every site it looks up: the profile measures exactly what plans ask for.
perf::PerfSites
collect_sites(const SweepOptions& options, const perf::SystemSpec& system) {
  const auto models = options.models.empty() ? perf::model_presets() : options.models;
  perf::PerfSites sites;
  perf::PerfDatabase db(system); // empty: every lookup takes the roofline path, and is recorded
  db.record_sites(&sites);
  for (const auto& name : models) {
    const perf::ModelArch model = perf::resolve_model(name);
    for (const auto& precision : swept_precisions()) {
      PlanRequest request{.model = model, .gpus = std::max(8, system.gpus_per_node)};
      request.precision = precision;
      request.profiled_attention = true;
      request.modes = {ServingMode::static_batching, ServingMode::aggregated, ServingMode::disaggregated};
      search(request, system, db);
    }
  }
  return sites;
}

int
number(const std::string& text) {
  return std::stoi(text);
}

} // namespace

ProfileSweep
build_profile_sweep(const SweepOptions& options, const perf::SystemSpec& system) {
  const std::vector<int> tokens =
      options.quick ? std::vector<int>{1, 16, 256, 4096}
                    : std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  const std::vector<int> prefill_batches = options.quick ? std::vector<int>{1, 4} : std::vector<int>{1, 2, 4, 8};
  const std::vector<int> prefill_lengths =
      options.quick ? std::vector<int>{256, 2048} : std::vector<int>{128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  const std::vector<int> decode_batches =
      options.quick ? std::vector<int>{1, 16, 128} : std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  const std::vector<int> decode_lengths =
      options.quick ? std::vector<int>{512, 4096} : std::vector<int>{128, 512, 1024, 2048, 4096, 8192, 16384, 32768};
  ProfileSweep sweep;
  for (const auto& [table, key] : collect_sites(options, system)) {
    const std::string site = fmt::format("{} {}", table, fmt::join(key, " "));
    if (table == "gemm") {
      const auto& kind = key[0];
      if (kind == "w8a16" || kind == "w4a16") {
        sweep.skipped.push_back(site + ": weight-only products need Marlin-style kernels optkit does not ship; "
                                       "plans use the roofline");
        continue;
      }
      for (const int m : tokens)
        sweep.gemms.push_back({kind, m, number(key[1]), number(key[2])});
      continue;
    }
    if (table == "moe") {
      sweep.skipped.push_back(site + ": no grouped-expert kernel yet; plans use the roofline");
      continue;
    }
    const bool prefill = table == "attention_prefill";
    const int heads = number(key[1]), kv_heads = number(key[2]), head_dim = number(key[3]);
    if (key[0] != "bf16") {
      sweep.skipped.push_back(site + ": the attention kernels read a BF16 cache");
      continue;
    }
    if (head_dim > 256 || heads % kv_heads != 0) {
      sweep.skipped.push_back(site + ": the attention kernels need head_dim <= 256 and heads a multiple of kv_heads");
      continue;
    }
    for (const int batch : prefill ? prefill_batches : decode_batches)
      for (const int length : prefill ? prefill_lengths : decode_lengths) {
        const double bytes = prefill ? 2.0 * batch * heads * double(length) * length
                                     : 4.0 * batch * kv_heads * double(length) * head_dim;
        if (bytes > (prefill ? options.prefill_score_limit_bytes : options.decode_cache_limit_bytes))
          continue; // beyond: lookups extrapolate from the largest measured point
        sweep.attention.push_back({prefill, key[0], heads, kv_heads, head_dim, batch, length});
      }
  }
  // From 4 KiB, where a pass costs its launch and not its bytes (a decode step's norms and
  // activations at batch 1), to 4 GiB.
  for (std::uint64_t bytes = 1ull << 12; bytes <= (1ull << 32); bytes <<= options.quick ? 4 : 2)
    sweep.copy_bytes.push_back(bytes);
  sweep.skipped.push_back("collective: one GPU measures no collectives; plans use link bandwidth (roofline)");
  return sweep;
}

nlohmann::json
to_json(const ProfileSweep& sweep) {
  nlohmann::json gemms = nlohmann::json::array(), attention = nlohmann::json::array();
  for (const auto& g : sweep.gemms)
    gemms.push_back({g.kind, g.m, g.n, g.k});
  for (const auto& a : sweep.attention)
    attention.push_back({a.prefill, a.kv_dtype, a.heads, a.kv_heads, a.head_dim, a.batch, a.length});
  return {{"gemm", gemms}, {"attention", attention}, {"copy_bytes", sweep.copy_bytes}, {"skipped", sweep.skipped}};
}

ProfileSweep
profile_sweep_from_json(const nlohmann::json& j) {
  ProfileSweep sweep;
  for (const auto& g : j.at("gemm"))
    sweep.gemms.push_back({g.at(0).get<std::string>(), g.at(1).get<int>(), g.at(2).get<int>(), g.at(3).get<int>()});
  for (const auto& a : j.at("attention"))
    sweep.attention.push_back({a.at(0).get<bool>(), a.at(1).get<std::string>(), a.at(2).get<int>(), a.at(3).get<int>(),
                               a.at(4).get<int>(), a.at(5).get<int>(), a.at(6).get<int>()});
  sweep.copy_bytes = j.at("copy_bytes").get<std::vector<std::uint64_t>>();
  sweep.skipped = j.at("skipped").get<std::vector<std::string>>();
  return sweep;
}

std::string
sweep_summary(const ProfileSweep& sweep) {
  std::size_t prefill = 0;
  for (const auto& a : sweep.attention)
    prefill += a.prefill ? 1 : 0;
  return fmt::format("gemm {}, attention_prefill {}, attention_decode {}, memory {} ({} points; {} sites skipped)",
                     sweep.gemms.size(), prefill, sweep.attention.size() - prefill, sweep.copy_bytes.size(),
                     sweep.points(), sweep.skipped.size());
}

} // namespace optkit::plan
