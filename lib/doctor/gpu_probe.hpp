// What the CUDA side of this binary can see. Without CUDA compiled in, the probe says so; it
// never pretends a device exists.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::doctor {

struct GpuDevice {
  int index = 0;
  std::string name;
  std::uint64_t memory_bytes = 0;
  std::string compute_capability; // "9.0"
  int multiprocessors = 0;
};

struct GpuProbe {
  bool compiled = false;  // CUDA support built in
  int driver_version = 0; // e.g. 13000; 0 when no driver
  int runtime_version = 0;
  std::string error; // why no device is usable
  std::vector<GpuDevice> devices;
};

GpuProbe probe_gpus();
nlohmann::json to_json(const GpuProbe& probe);

struct KernelSelfTest {
  bool ran = false;
  std::string error;
  double max_abs_error = 0;
  double gigabytes_per_second = 0;
  // The decode attention kernel plan profile times, over shapes that reach each of its paths
  // (head_dim 64/128/256 grouped, 96 generic; GQA groups of 1 to 8; one to many splits).
  std::string decode_attention_error; // empty when it ran
  double decode_attention_max_error = 0;
};

// Largest BF16 output error a correct decode attention shows on the self-test's inputs.
constexpr double kDecodeAttentionTolerance = 2e-2;

// Runs the first CUDA kernel (axpy) and the decode attention kernel on `device` against CPU
// references.
KernelSelfTest run_kernel_self_test(int device);

} // namespace optkit::doctor
