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
};

// Runs the first CUDA kernel (axpy) on `device` against a CPU reference.
KernelSelfTest run_kernel_self_test(int device);

} // namespace optkit::doctor
