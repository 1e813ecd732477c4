// libFuzzer target: arbitrary bytes as a worker spec file.
#include "core/error.hpp"
#include "proc/worker_spec.hpp"

#include "../support/scratch_dir.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const optkit::test::ScratchDir scratch; // removed when the fuzzer exits
  static const auto file = scratch / "spec.json";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    optkit::proc::read_worker_spec(file);
  } catch (const optkit::InputError&) {
  }
  return 0;
}
