#include "core/available_cpus.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include <sched.h>

namespace optkit {

namespace {

std::string
first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The process's quota: cgroup v2's cpu.max, else cgroup v1's cfs quota and period.
std::optional<unsigned>
cgroup_quota_cpus() {
  if (const std::string v2 = first_line("/sys/fs/cgroup/cpu.max"); !v2.empty())
    return quota_cpus(v2);
  const std::string quota = first_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  const std::string period = first_line("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  if (quota.empty() || period.empty())
    return std::nullopt;
  return quota_cpus(quota + " " + period);
}

} // namespace

std::optional<unsigned>
quota_cpus(std::string_view text) {
  const auto space = text.find(' ');
  if (space == std::string_view::npos)
    return std::nullopt;
  const auto number = [](std::string_view s) -> std::optional<std::int64_t> {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
      s.remove_suffix(1);
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (error != std::errc() || end != s.data() + s.size())
      return std::nullopt;
    return value;
  };
  const auto quota = number(text.substr(0, space));
  const auto period = number(text.substr(space + 1));
  if (!quota || !period || *quota <= 0 || *period <= 0)
    return std::nullopt; // "max" or -1: no quota
  const std::int64_t cpus = (*quota + *period - 1) / *period;
  return static_cast<unsigned>(std::clamp<std::int64_t>(cpus, 1, 1 << 20));
}

unsigned
available_cpus() {
  static const unsigned cpus = [] {
    unsigned n = std::max(1u, std::thread::hardware_concurrency());
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      n = std::min(n, static_cast<unsigned>(std::max(1, CPU_COUNT(&set))));
    if (const auto quota = cgroup_quota_cpus())
      n = std::min(n, *quota);
    return n;
  }();
  return cpus;
}

} // namespace optkit
