#include "core/text.hpp"

#include <cctype>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string.h>

namespace optkit {

std::vector<std::string>
split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) {
      break;
    }
    start = end + 1;
  }
  return parts;
}

std::string
join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) {
      out += separator;
    }
    out += parts[i];
  }
  return out;
}

std::string_view
trim(std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && is_space(text.front())) {
    text.remove_prefix(1);
  }
  while (!text.empty() && is_space(text.back())) {
    text.remove_suffix(1);
  }
  return text;
}

std::string_view
strip_chars(std::string_view text, std::string_view chars) {
  const auto first = text.find_first_not_of(chars);
  if (first == std::string_view::npos)
    return {};
  return text.substr(first, text.find_last_not_of(chars) - first + 1);
}

bool
is_index_text(std::string_view text) {
  return !text.empty() && text.size() <= 9 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string
ascii_case(std::string text, bool upper) {
  for (auto& c : text)
    c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::size_t
edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: three rows of the dynamic programme suffice.
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  std::iota(previous.begin(), previous.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::optional<std::string>
closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  // "h100" means h100_sxm more often than v100: a name that extends the word at a separator
  // beats any typo.
  for (const auto& candidate : candidates)
    if (candidate.size() > word.size() + 1 && candidate.starts_with(word) &&
        std::string_view("_-.").find(candidate[word.size()]) != std::string_view::npos)
      return candidate;
  const std::size_t allowed = std::max<std::size_t>(1, word.size() / 3);
  std::optional<std::string> best;
  std::size_t best_distance = allowed + 1;
  for (const auto& candidate : candidates) {
    const std::size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string
format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return "?";
  }
  if (seconds < 60) {
    return fmt::format("{:.1f} s", seconds);
  }
  const auto total = static_cast<long long>(std::llround(seconds));
  if (total < 3600) {
    return fmt::format("{} min {:02} s", total / 60, total % 60);
  }
  return fmt::format("{} h {:02} min", total / 3600, (total % 3600) / 60);
}

std::string
format_bytes(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

std::string
signal_name(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? fmt::format("SIG{}", name) : fmt::format("signal {}", signal);
}

std::string
csv_field(std::string_view value) {
  if (value.find_first_of(",\"\n\r") == std::string_view::npos) {
    return std::string(value);
  }
  std::string out = "\"";
  for (char c : value) {
    out += c;
    if (c == '"') {
      out += '"';
    }
  }
  out += '"';
  return out;
}

std::string
shell_quote(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@") ==
          std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

} // namespace optkit
