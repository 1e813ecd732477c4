#include "doctor/gpu_probe.hpp"

#include "core/build_config.hpp"

#include <fmt/format.h>

#if OPTKIT_HAVE_CUDA
#include "cuda/device_query.cuh"
#include "cuda/operator_profiler.cuh"
#include "cuda/vector_add.cuh"
#endif

namespace optkit::doctor {

GpuProbe
probe_gpus() {
  GpuProbe probe;
#if OPTKIT_HAVE_CUDA
  probe.compiled = true;
  const cuda::DeviceQuery query = cuda::query_devices();
  probe.driver_version = query.driver_version;
  probe.runtime_version = query.runtime_version;
  probe.error = query.error;
  for (const auto& d : query.devices) {
    probe.devices.push_back(
        {d.index, d.name, d.memory_bytes, fmt::format("{}.{}", d.compute_major, d.compute_minor), d.multiprocessors});
  }
#else
  probe.error = "this optkit was built without CUDA";
#endif
  return probe;
}

nlohmann::json
to_json(const GpuProbe& probe) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : probe.devices) {
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"memory_bytes", d.memory_bytes},
                       {"compute_capability", d.compute_capability},
                       {"multiprocessors", d.multiprocessors}});
  }
  return {{"compiled", probe.compiled},
          {"driver_version", probe.driver_version},
          {"runtime_version", probe.runtime_version},
          {"error", probe.error},
          {"devices", devices}};
}

KernelSelfTest
run_kernel_self_test(int device) {
  KernelSelfTest test;
#if OPTKIT_HAVE_CUDA
  const cuda::AxpyCheck check = cuda::run_axpy_check(device, std::size_t{1} << 24);
  test.ran = check.error.empty();
  test.error = check.error;
  test.max_abs_error = check.max_abs_error;
  test.gigabytes_per_second = check.gigabytes_per_second;
  struct Shape {
    int batch, kv_len, heads, kv_heads, head_dim;
  };
  const Shape shapes[] = {{1, 1000, 32, 8, 128}, {3, 77, 28, 4, 128},   {2, 513, 8, 8, 64}, {1, 300, 16, 2, 256},
                          {2, 100, 12, 4, 96},   {1, 5000, 64, 8, 128}, {2, 1, 32, 8, 128}};
  try {
    cuda::OperatorProfiler profiler(device);
    for (const Shape& x : shapes)
      test.decode_attention_max_error =
          std::max(test.decode_attention_max_error,
                   profiler.attention_decode_max_error(x.batch, x.kv_len, x.heads, x.kv_heads, x.head_dim));
  } catch (const std::exception& e) {
    test.decode_attention_error = e.what();
  }
#else
  (void)device;
  test.error = "this optkit was built without CUDA";
#endif
  return test;
}

} // namespace optkit::doctor
