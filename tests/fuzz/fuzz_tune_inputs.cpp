// libFuzzer target: the files tune reads from users. The first byte picks what the rest is:
//   even → a search space YAML: a space or an InputError; a parsed space's defaults, completion,
//          grid size and a random configuration are computed, and that configuration passes the
//          space's own check;
//   odd  → a simulator setup YAML: a setup or an InputError.
#include "core/error.hpp"
#include "sim/sim_config.hpp"
#include "tune/optimizer.hpp"
#include "tune/search_space.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      const auto space = optkit::tune::parse_search_space(text, "fuzz.yaml");
      (void)space.defaults();
      (void)space.complete(nlohmann::json::object());
      (void)space.grid_size(3);
      const auto config = optkit::tune::random_configuration(space, size);
      space.check(config);
    } else {
      (void)optkit::sim::parse_sim_setup(text, "fuzz.yaml");
    }
  } catch (const optkit::InputError&) {
  }
  return 0;
}
