#include "core/byte_size.hpp"

#include "core/error.hpp"

#include <cctype>
#include <cmath>

namespace optkit {

std::uint64_t
parse_byte_size(const std::string& text, const std::string& flag) {
  std::size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  for (auto& c : unit)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kib" || unit == "kb")
    scale = 1024.0;
  else if (unit == "m" || unit == "mib" || unit == "mb")
    scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib" || unit == "gb")
    scale = 1024.0 * 1024 * 1024;
  if (end == 0 || scale == 0 || !std::isfinite(value) || value <= 0 || value * scale > 1e18)
    throw InputError(flag + " '" + text + "': expected a size such as 4GiB, 512MiB or a number of bytes");
  return static_cast<std::uint64_t>(value * scale);
}

} // namespace optkit
