// For fuzz targets whose reader takes a file: the input written to `name` in a scratch folder of
// the process (removed when the fuzzer exits). One name per target: the path is fixed at the
// first call.
#pragma once

#include "../support/scratch_dir.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

inline const std::filesystem::path&
fuzz_input_file(const std::uint8_t* data, std::size_t size, const std::string& name) {
  static const optkit::test::ScratchDir scratch;
  static const auto file = scratch / name;
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return file;
}
