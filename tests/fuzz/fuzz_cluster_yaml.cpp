// libFuzzer target: arbitrary bytes as a `plan hetero --cluster` file. Properties: a cluster or an
// InputError, never a crash; a parsed cluster has at least one group, positive counts, and a
// positive-bandwidth link between any two of its groups.
#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "hetero/cluster_spec.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto profiles = optkit::find_data_directory().path / "profiles";
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto cluster = optkit::hetero::parse_cluster(text, "fuzz.yaml", profiles);
    if (cluster.groups.empty() || cluster.devices() < 1)
      std::abort();
    for (const auto& a : cluster.groups) {
      if (a.count < 1)
        std::abort();
      for (const auto& b : cluster.groups)
        if (!(cluster.link(a, b).bandwidth_gbs > 0))
          std::abort();
    }
  } catch (const optkit::InputError&) {
  }
  return 0;
}
