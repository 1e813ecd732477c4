#include "check.cuh"
#include "device_query.cuh"

namespace optkit::cuda {
namespace {

std::string
list_devices(DeviceQuery& query) {
  int count = 0;
  OPTKIT_CUDA_TRY(cudaGetDeviceCount(&count));
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    OPTKIT_CUDA_TRY(cudaGetDeviceProperties(&prop, i));
    DeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.memory_bytes = prop.totalGlobalMem;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    int clock_khz = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i) == cudaSuccess) {
      info.memory_clock_mhz = clock_khz / 1000.0;
    }
    cudaDeviceGetAttribute(&info.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, i);
    query.devices.push_back(info);
  }
  return {};
}

} // namespace

DeviceQuery
query_devices() {
  DeviceQuery query;
  cudaRuntimeGetVersion(&query.runtime_version);
  if (cudaDriverGetVersion(&query.driver_version) != cudaSuccess || query.driver_version == 0) {
    query.error = "no CUDA driver found (libcuda.so is not installed or not loadable)";
    return query;
  }
  query.error = list_devices(query);
  if (query.error.empty() && query.devices.empty()) {
    query.error = "the CUDA driver reports no devices";
  }
  return query;
}

} // namespace optkit::cuda
