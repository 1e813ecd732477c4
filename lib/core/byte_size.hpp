// Sizes given on the command line and in config files: "4GiB", "512MiB", "1.5G", "1000000".
#pragma once

#include <cstdint>
#include <string>

namespace optkit {

// Parses a size in bytes: a number with no unit or "B", or with k/KiB/KB, m/MiB/MB, g/GiB/GB
// (any case; every unit is binary: 1 GB = 2^30 bytes). Throws InputError naming `flag` and the
// accepted forms for anything else, zero, or more than 10^18 bytes.
std::uint64_t parse_byte_size(const std::string& text, const std::string& flag);

} // namespace optkit
