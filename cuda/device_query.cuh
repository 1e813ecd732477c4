// Which CUDA devices this process can see. Plain C++ interface: callers need no CUDA headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::uint64_t memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  double memory_clock_mhz = 0;
  int memory_bus_bits = 0;
};

struct DeviceQuery {
  int driver_version = 0;  // 0 when no driver is installed
  int runtime_version = 0; // the statically linked CUDA runtime
  std::string error;       // why no device is usable (empty when devices were listed)
  std::vector<DeviceInfo> devices;
};

DeviceQuery query_devices();

} // namespace optkit::cuda
