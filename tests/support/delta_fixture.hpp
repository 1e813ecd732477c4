// tiny-code as a 4-bit 2:4 delta of tiny-base, made once per test process with the real
// `optkit compress delta` (a few calibration samples: the point is a real artifact, not quality).
#pragma once

#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace optkit::test {

inline const std::filesystem::path&
code_delta() {
  static ScratchDir scratch;
  static const std::filesystem::path dir = [] {
    const auto models = testdata_dir() / "models";
    const auto out = scratch.path() / "code-delta";
    const std::string command = "OPTKIT_ARCHIVE='" + (scratch.path() / "archive.db").string() + "' '" +
                                optkit_binary().string() + "' -q compress delta --base '" +
                                (models / "tiny-base").string() + "' --finetuned '" + (models / "tiny-code").string() +
                                "' --recipe delta_2of4_int4 --calib '" +
                                (testdata_dir() / "corpora" / "code.calib.txt").string() +
                                "' --samples 4 --seq-len 32 -o '" + out.string() + "' > /dev/null";
    REQUIRE(std::system(command.c_str()) == 0);
    return out;
  }();
  return dir;
}

} // namespace optkit::test
