// libFuzzer target: arbitrary bytes as a worker spec file.
#include "core/error.hpp"
#include "proc/worker_spec.hpp"

#include "fuzz_scratch.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const FuzzScratch scratch("optkit-fuzz-spec", ".json");
  const auto& file = scratch.path();
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
