// libFuzzer target: arbitrary bytes as a worker spec file.
#include "core/error.hpp"
#include "proc/worker_spec.hpp"

#include "fuzz_input_file.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& file = fuzz_input_file(data, size, "spec.json");
  try {
    optkit::proc::read_worker_spec(file);
  } catch (const optkit::InputError&) {
  }
  return 0;
}
