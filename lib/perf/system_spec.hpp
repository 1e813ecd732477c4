// A GPU system as the planner sees it: peak tensor rates, memory size and bandwidth, the links
// between GPUs, what an engine holds back, and the efficiencies the speed-of-light fallback
// divides by. Read from profiles/systems/<name>.yaml (figures and their sources in the file).
#pragma once

#include "perf/estimate.hpp"
#include "perf/precision.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace optkit::perf {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0; // bytes

// Fractions of peak an engine's own attention kernels reach: prefill against dense tensor peak,
// decode (reading the KV cache) against HBM bandwidth.
struct AttentionEfficiency {
  double prefill = 0.50;
  double decode = 0.80;
};

// Fractions of peak that real kernels reach when no measurement says otherwise.
struct DefaultEfficiency {
  double gemm = 0.70;              // large matrix products vs dense tensor peak
  double attention = 0.50;         // prefill attention vs dense tensor peak
  double decode_attention = 0.80;  // decode attention (reading the KV cache) vs HBM bandwidth
  double memory = 0.80;            // other memory-bound kernels vs HBM bandwidth
  double communication = 0.80;     // collectives vs per-direction link bandwidth
  double kernel_overhead_us = 4.0; // launch and tail per kernel
  std::string calibrated;          // the published points they were fitted to ("": defaults)
  // Each engine's attention kernels, fitted to that engine's published points (by engine name);
  // an engine without points takes `attention` and `decode_attention`.
  std::map<std::string, AttentionEfficiency> engine_attention;

  AttentionEfficiency attention_of(const std::string& engine) const;

  // How estimates made with these efficiencies are labelled: calibrated or roofline.
  SourceLabel fallback_label() const { return calibrated.empty() ? roofline : SourceLabel::calibrated; }
};

struct SystemSpec {
  std::string name;
  std::string description;
  // GPU
  std::string gpu_name;
  double memory_gib = 0;
  double memory_bandwidth_gbs = 0; // GB/s (10^9 bytes)
  double fp16_tflops = 0;          // dense tensor-core rate
  double bf16_tflops = 0;          // 0: no bf16 tensor cores (bf16 runs as fp16)
  double fp8_tflops = 0;           // 0: no fp8 tensor cores (fp8 weights run weight-only)
  double int8_tops = 0;            // 0: no int8 tensor cores
  double tdp_w = 0;
  // node and links (per GPU, per direction)
  int gpus_per_node = 1;
  double intra_node_bandwidth_gbs = 0;
  double inter_node_bandwidth_gbs = 0;
  double collective_latency_us = 10;
  // what every engine process holds back besides weights, activations and KV cache
  double runtime_reserve_gib = 3.5;
  double collective_reserve_mib = 392;
  DefaultEfficiency efficiency;
  std::vector<std::string> sources;

  double memory_bytes() const { return memory_gib * kGiB; }
  // Dense tensor-core FLOP/s (or OP/s) a product of this kind runs at.
  double peak_flops(const std::string& gemm_kind) const;
  // Bytes/s of the link between `gpus` cooperating GPUs (inside a node when they fit in one).
  double link_bytes_per_s(int gpus) const;
};

// The systems under `profiles_dir`/systems, sorted by name.
std::vector<std::string> list_systems(const std::filesystem::path& profiles_dir);

// Loads and validates one system; unknown name → InputError listing the systems that exist.
SystemSpec load_system(const std::filesystem::path& profiles_dir, const std::string& name);
SystemSpec load_system_file(const std::filesystem::path& file);

} // namespace optkit::perf
