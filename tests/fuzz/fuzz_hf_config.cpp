// libFuzzer target: a config.json given to `optkit plan --model` must parse into an architecture
// or throw InputError, never crash, for any bytes.
#include "core/error.hpp"
#include "perf/model_arch.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto arch = optkit::perf::parse_hf_config(text, "fuzz/config.json");
    (void)arch.total_parameters();
    (void)arch.kv_elements_per_token_per_layer();
  } catch (const optkit::InputError&) {
  }
  return 0;
}
