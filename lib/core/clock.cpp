#include "core/clock.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

namespace optkit {

double
seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double
SystemClock::monotonic_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::int64_t
SystemClock::wall_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void
SystemClock::sleep_for(double seconds) const {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

const SystemClock&
SystemClock::instance() {
  static const SystemClock clock;
  return clock;
}

std::string
iso8601_utc(std::int64_t epoch_ms) {
  const std::time_t seconds = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(epoch_ms % 1000));
}

namespace {

std::optional<std::int64_t>
parse_age(std::string_view text, std::int64_t now_ms) {
  if (text.size() < 2) {
    return std::nullopt;
  }
  std::int64_t unit_ms = 0;
  switch (text.back()) {
  case 's':
    unit_ms = 1000;
    break;
  case 'm':
    unit_ms = 60'000;
    break;
  case 'h':
    unit_ms = 3'600'000;
    break;
  case 'd':
    unit_ms = 86'400'000;
    break;
  case 'w':
    unit_ms = 7 * 86'400'000LL;
    break;
  default:
    return std::nullopt;
  }
  std::int64_t count = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9' || count > 1'000'000'000) {
      return std::nullopt;
    }
    count = count * 10 + (c - '0');
  }
  return now_ms - count * unit_ms;
}

} // namespace

std::optional<std::int64_t>
parse_time_point(std::string_view text, std::int64_t now_ms) {
  if (auto age = parse_age(text, now_ms)) {
    return age;
  }
  std::tm tm{};
  int consumed = 0;
  const std::string copy(text);
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (std::sscanf(copy.c_str(), "%4d-%2d-%2d%n", &year, &month, &day, &consumed) != 3 || consumed != 10) {
    return std::nullopt;
  }
  std::string_view rest = text.substr(10);
  if (!rest.empty()) {
    if (rest.front() != 'T' && rest.front() != ' ') {
      return std::nullopt;
    }
    const std::string time_part(rest.substr(1));
    int used = 0;
    if (std::sscanf(time_part.c_str(), "%2d:%2d:%2d%n", &hour, &minute, &second, &used) != 3) {
      return std::nullopt;
    }
    const std::string_view tail = std::string_view(time_part).substr(static_cast<std::size_t>(used));
    if (!(tail.empty() || tail == "Z")) {
      return std::nullopt;
    }
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

} // namespace optkit
