// libFuzzer target: arbitrary bytes as an optkit config file. Any outcome but a validated
// document or an InputError (a crash, a hang, another exception) is a bug.
#include "core/error.hpp"
#include "core/settings.hpp"
#include "core/yaml_schema.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto doc = optkit::config::parse_yaml(text, "fuzz.yaml", optkit::settings_schema());
    if (!doc.is_object()) {
      __builtin_trap(); // a validated config is always a mapping
    }
  } catch (const optkit::InputError&) {
  }
  return 0;
}
