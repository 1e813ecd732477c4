// The benchmarks' positional arguments: argv[index] read whole as a number of at least `minimum`,
// or `fallback` where the argument is absent. Anything else (a flag such as --help, a word, a
// trailing letter, a count below the minimum) prints one line naming the argument and the
// program's usage, and exits 2: a benchmark never runs on a value it did not understand (zero
// rounds printed a table of 1e300s).
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <system_error>

namespace optkit::test {

template <typename T>
T
positional_number(int argc, char** argv, int index, std::string_view name, T fallback, T minimum,
                  std::string_view usage) {
  if (index >= argc)
    return fallback;
  const std::string_view text = argv[index];
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < minimum) {
    fmt::print(stderr, "argument {} ({}) is '{}': give a number of at least {}. Usage: {}\n", index, name, text,
               minimum, usage);
    std::exit(2);
  }
  return value;
}

} // namespace optkit::test
