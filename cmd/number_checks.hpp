// Range checks for numeric flags. CLI11's PositiveNumber, NonNegativeNumber and Range print their
// bounds with std::to_string, so `--timeout -1` was answered with DBL_MAX's 309 digits; these
// name the bound in a few characters (`-1 is not >= 0`).
#pragma once

#include <CLI/CLI.hpp>

namespace optkit::cmd {

// value > 0 and finite.
CLI::Validator positive_number();
// value >= 0 and finite.
CLI::Validator non_negative_number();
// lo <= value <= hi.
CLI::Validator number_range(double lo, double hi);

} // namespace optkit::cmd
