// The CUDA side: what the probe reports, and the first kernel against a CPU reference on every
// visible device. Without a device ctest reports this file as skipped (SKIPPED: below).
#include "doctor/gpu_probe.hpp"

#include "core/build_info.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::doctor;

TEST_CASE("the GPU probe is honest about what was compiled in") {
  const GpuProbe probe = probe_gpus();
  CHECK(probe.compiled == build_info().cuda);
  if (!probe.compiled) {
    CHECK(probe.devices.empty());
    CHECK_FALSE(probe.error.empty());
    return;
  }
  CHECK(probe.runtime_version >= 12000);
  CHECK((probe.devices.empty() != probe.error.empty()));
}

TEST_CASE("the axpy and decode attention kernels match the CPU on every visible device") {
  const GpuProbe probe = probe_gpus();
  if (probe.devices.empty()) {
    MESSAGE("SKIPPED: no CUDA device: " << probe.error);
    return;
  }
  for (const auto& device : probe.devices) {
    CAPTURE(device.name);
    const KernelSelfTest test = run_kernel_self_test(device.index);
    CHECK(test.ran);
    CHECK(test.error.empty());
    CHECK(test.max_abs_error < 1e-5);
    CHECK(test.gigabytes_per_second > 0);
    CHECK(test.decode_attention_error.empty());
    CHECK(test.decode_attention_max_error < kDecodeAttentionTolerance);
    MESSAGE("decode attention max error " << test.decode_attention_max_error);
  }
}
