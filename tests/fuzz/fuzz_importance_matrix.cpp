// libFuzzer target: any bytes as an --imatrix file, llama-imatrix's GGUF or legacy imatrix.dat
// format (compress --recipe q4_k_m --imatrix FILE), must read or throw InputError, never crash or
// read outside the file. Seeds: a small file of each format.
#include "compress/importance_matrix.hpp"
#include "core/error.hpp"

#include "fuzz_input_file.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& file = fuzz_input_file(data, size, "imatrix");
  try {
    const auto matrix = optkit::compress::read_importance_matrix(file);
    for (const auto& [module, weight] : matrix.weights)
      if (weight.mean.size() != weight.in_sum2.size())
        __builtin_trap();
  } catch (const optkit::InputError&) {
  }
  return 0;
}
