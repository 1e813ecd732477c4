// libFuzzer target: arbitrary bytes as a --since value.
#include "core/clock.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::int64_t now = 1'700'000'000'000;
  const auto parsed = optkit::parse_time_point(text, now);
  if (parsed && text.size() <= 3 && *parsed > now) {
    __builtin_trap(); // an age never lies in the future
  }
  return 0;
}
