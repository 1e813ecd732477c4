// A heterogeneous GPU cluster for `optkit plan hetero` (SplitQuant's device groups): GPU types
// from profiles/systems/, how many of each and on which node, and the links between pipeline
// stages. From a YAML file:
//   name: 2xA100-40G+2xV100-32G
//   groups:
//     - {gpu: a100_40g, count: 2, node: n0}
//     - {gpu: v100, count: 2, node: n1}
//   links:                      # optional; default: the systems' own figures
//     intra_node: {bandwidth_gbs: 150, latency_us: 10}
//     inter_node: {bandwidth_gbs: 12.5, latency_us: 20}
#pragma once

#include "perf/system_spec.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::hetero {

struct DeviceGroup {
  std::string gpu; // the system's name, e.g. "a100_40g"
  perf::SystemSpec system;
  int count = 1;
  std::string node; // GPUs of groups with the same node share its intra-node link
};

struct Link {
  double bandwidth_gbs = 0; // per direction, 10^9 bytes/s
  double latency_us = 0;
};

struct ClusterSpec {
  std::string name;
  std::string source; // the file, for messages
  std::vector<DeviceGroup> groups;
  std::optional<Link> intra_node; // none: the slower system's intra-node figures
  std::optional<Link> inter_node; // none: the slower system's inter-node figures

  int devices() const;
  // The link a stage on `from` uses to hand activations to a stage on `to`.
  Link link(const DeviceGroup& from, const DeviceGroup& to) const;
};

// InputError with `source:line:col:` for malformed YAML, an unknown key or GPU, a bad count.
ClusterSpec parse_cluster(const std::string& yaml, const std::string& source,
                          const std::filesystem::path& profiles_dir);
ClusterSpec load_cluster(const std::filesystem::path& file, const std::filesystem::path& profiles_dir);

} // namespace optkit::hetero
