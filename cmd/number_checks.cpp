#include "number_checks.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>

namespace optkit::cmd {
namespace {

// The flag's own conversion reports text that is not a number; a check only judges numbers.
CLI::Validator
number_check(std::string description, std::function<std::string(double, const std::string&)> judge) {
  return CLI::Validator(
      [judge = std::move(judge)](std::string& input) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(input.c_str(), &end); // 1e400 reads as inf, refused as such
        if (input.empty() || end != input.c_str() + input.size())
          return fmt::format("{} is not a number", input);
        return judge(value, input);
      },
      std::move(description));
}

} // namespace

CLI::Validator
positive_number() {
  return number_check("POSITIVE", [](double value, const std::string& input) {
    return std::isfinite(value) && value > 0 ? std::string() : fmt::format("{} is not a finite number > 0", input);
  });
}

CLI::Validator
non_negative_number() {
  return number_check("NONNEGATIVE", [](double value, const std::string& input) {
    return std::isfinite(value) && value >= 0 ? std::string() : fmt::format("{} is not a finite number >= 0", input);
  });
}

CLI::Validator
number_range(double lo, double hi) {
  return number_check(fmt::format("[{:g} - {:g}]", lo, hi), [lo, hi](double value, const std::string& input) {
    return value >= lo && value <= hi ? std::string() : fmt::format("{} is not in [{:g}, {:g}]", input, lo, hi);
  });
}

} // namespace optkit::cmd
