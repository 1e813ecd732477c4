#include "hetero/cluster_spec.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/schema_fields.hpp"
#include "core/yaml_schema.hpp"

#include <algorithm>
#include <memory>

namespace optkit::hetero {

namespace {

using config::Field;
using config::number_field;
using config::object_field;
using config::Schema;
using config::Type;

const Schema&
cluster_schema() {
  static const Schema schema = [] {
    Schema link{"link",
                {number_field("bandwidth_gbs", "per direction, GB/s", 1e-6, 1e6, true),
                 number_field("latency_us", "per transfer, microseconds", 0, 1e9)}};
    Schema group{"device group",
                 {Field{"gpu", Type::string, true, "a system under profiles/systems/ (a100_40g, v100, ...)"},
                  number_field("count", "GPUs of this type", 1, 1024, true),
                  Field{"node", Type::string, false, "the node they sit in (default: one node per group)"}}};
    Field groups{"groups", Type::list, true, "the device groups, one entry per GPU type and node"};
    groups.item = std::make_shared<const Field>(
        Field{"group", Type::object, true, "a device group", {}, {}, {}, std::make_shared<const Schema>(group)});
    Schema links{"links",
                 {object_field("intra_node", "between GPUs of one node", link),
                  object_field("inter_node", "between GPUs of different nodes", link)}};
    return Schema{"cluster",
                  {Field{"name", Type::string, false, "the cluster's name"},
                   Field{"description", Type::string, false, "one line for people"}, groups,
                   object_field("links", "links between pipeline stages", links)}};
  }();
  return schema;
}

std::optional<Link>
parse_link(const nlohmann::json& doc, const char* key) {
  if (!doc.contains("links") || !doc["links"].contains(key))
    return std::nullopt;
  const auto& l = doc["links"][key];
  return Link{l.at("bandwidth_gbs").get<double>(), l.value("latency_us", 0.0)};
}

} // namespace

int
ClusterSpec::devices() const {
  int n = 0;
  for (const auto& g : groups)
    n += g.count;
  return n;
}

Link
ClusterSpec::link(const DeviceGroup& from, const DeviceGroup& to) const {
  const bool same_node = from.node == to.node;
  if (same_node && intra_node)
    return *intra_node;
  if (!same_node && inter_node)
    return *inter_node;
  const auto bandwidth = [&](const perf::SystemSpec& s) {
    return same_node ? s.intra_node_bandwidth_gbs : s.inter_node_bandwidth_gbs;
  };
  return {std::min(bandwidth(from.system), bandwidth(to.system)),
          std::max(from.system.collective_latency_us, to.system.collective_latency_us)};
}

ClusterSpec
parse_cluster(const std::string& yaml, const std::string& source, const std::filesystem::path& profiles_dir) {
  const auto doc = config::parse_yaml(yaml, source, cluster_schema());
  ClusterSpec c;
  c.source = source;
  c.name = doc.value("name", std::filesystem::path(source).stem().string());
  const auto& groups = doc.at("groups");
  if (groups.empty())
    throw InputError(source + ": groups: list at least one device group");
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    DeviceGroup group;
    group.gpu = g.at("gpu").get<std::string>();
    const double count = g.at("count").get<double>();
    if (count != static_cast<int>(count))
      throw InputError(source + ": groups[" + std::to_string(i) + "].count " + g.at("count").dump() +
                       ": a whole number of GPUs");
    group.count = static_cast<int>(count);
    group.node = g.value("node", "node" + std::to_string(i));
    try {
      group.system = perf::load_system(profiles_dir, group.gpu);
    } catch (const InputError& e) {
      throw InputError(source + ": groups[" + std::to_string(i) + "].gpu: " + e.what());
    }
    c.groups.push_back(std::move(group));
  }
  c.intra_node = parse_link(doc, "intra_node");
  c.inter_node = parse_link(doc, "inter_node");
  return c;
}

ClusterSpec
load_cluster(const std::filesystem::path& file, const std::filesystem::path& profiles_dir) {
  return parse_cluster(read_input_file(file, "--cluster"), file.string(), profiles_dir);
}

} // namespace optkit::hetero
