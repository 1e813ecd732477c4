#include "perf/system_spec.hpp"

#include "core/error.hpp"
#include "core/schema_fields.hpp"
#include "core/text.hpp"
#include "core/yaml_schema.hpp"

#include <algorithm>
#include <memory>

namespace optkit::perf {

namespace {

using config::Field;
using config::object_field;
using config::Schema;
using config::Type;

Field
number(std::string name, std::string help, bool required = true, double minimum = 0) {
  Field field{std::move(name), Type::number, required, std::move(help)};
  field.minimum = minimum;
  return field;
}

const Schema&
system_schema() {
  static const Schema schema = [] {
    Schema gpu{"gpu",
               {number("memory_gib", "GPU memory in GiB"), number("memory_bandwidth_gbs", "HBM/GDDR bandwidth, GB/s"),
                number("fp16_tflops", "dense FP16 tensor TFLOP/s"),
                number("bf16_tflops", "dense BF16 tensor TFLOP/s (0: none)"),
                number("fp8_tflops", "dense FP8 tensor TFLOP/s (0: none)"),
                number("int8_tops", "dense INT8 tensor TOP/s (0: none)"), number("tdp_w", "board power, W", false)}};
    Field gpu_name{"name", Type::string, true, "marketing name of the GPU"};
    gpu.fields.insert(gpu.fields.begin(), gpu_name);
    Schema node{"node",
                {[] {
                   Field field{"gpus_per_node", Type::integer, true, "GPUs sharing the fast intra-node link"};
                   field.minimum = 1;
                   return field;
                 }(),
                 number("intra_node_bandwidth_gbs", "GPU-to-GPU bandwidth inside a node, GB/s per direction"),
                 number("inter_node_bandwidth_gbs", "network bandwidth per GPU between nodes, GB/s per direction"),
                 number("collective_latency_us", "fixed cost of one collective, microseconds")}};
    Schema reserve{"reserve",
                   {number("runtime_gib", "CUDA context, graphs and allocator slack per GPU, GiB"),
                    number("collectives_mib", "communication buffers per GPU when it has peers, MiB")}};
    Schema kernels{"engine attention",
                   {number("prefill", "fraction of tensor peak the engine's prefill attention reaches"),
                    number("decode", "fraction of memory bandwidth the engine's decode attention reaches")}};
    std::vector<Field> engines;
    for (const char* engine : {"vllm", "sglang", "trtllm", "llamacpp"})
      engines.push_back(object_field(engine, std::string(engine) + "'s attention kernels", kernels, false));
    Schema efficiency{
        "efficiency",
        {number("gemm", "fraction of tensor peak large matrix products reach"),
         number("attention", "fraction of tensor peak prefill attention reaches"),
         number("decode_attention", "fraction of memory bandwidth decode attention reaches (default: memory)", false),
         number("memory", "fraction of memory bandwidth memory-bound kernels reach"),
         number("communication", "fraction of link bandwidth collectives reach"),
         number("kernel_overhead_us", "launch and tail cost per kernel, microseconds"),
         object_field("engine_attention", "each engine's attention kernels, fitted to its published points",
                      Schema{"engine_attention", engines}, false),
         Field{"calibrated", Type::string, false,
               "the published points file these efficiencies were fitted to (optkit plan calibrate)"}}};
    Field sources{"sources", Type::list, true, "where each figure comes from"};
    sources.item = std::make_shared<const Field>(Field{"source", Type::string, true, "a citation"});
    return Schema{"system",
                  {Field{"name", Type::string, true, "system name, the file's stem"},
                   Field{"description", Type::string, true, "one line for people"},
                   object_field("gpu", "the GPU", gpu, true), object_field("node", "links between GPUs", node, true),
                   object_field("reserve", "memory engines hold back", reserve, true),
                   object_field("efficiency", "speed-of-light fallback efficiencies", efficiency, true), sources}};
  }();
  return schema;
}

} // namespace

double
SystemSpec::peak_flops(const std::string& gemm_kind) const {
  const double sixteen = (bf16_tflops > 0 ? bf16_tflops : fp16_tflops) * 1e12;
  if (gemm_kind == "fp8")
    return fp8_tflops > 0 ? fp8_tflops * 1e12 : sixteen;
  if (gemm_kind == "int8")
    return int8_tops > 0 ? int8_tops * 1e12 : sixteen;
  if (gemm_kind == "fp16")
    return fp16_tflops * 1e12;
  return sixteen;
}

double
SystemSpec::link_bytes_per_s(int gpus) const {
  return (gpus <= gpus_per_node ? intra_node_bandwidth_gbs : inter_node_bandwidth_gbs) * 1e9;
}

std::vector<std::string>
list_systems(const std::filesystem::path& profiles_dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(profiles_dir / "systems", error))
    if (entry.path().extension() == ".yaml")
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

SystemSpec
load_system(const std::filesystem::path& profiles_dir, const std::string& name) {
  // Only a name the directory lists: an arbitrary string (a path, or longer than a file name may
  // be) never reaches the filesystem.
  const auto names = list_systems(profiles_dir);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string message = "--system " + name + ": unknown system";
    if (const auto close = closest_match(name, names))
      message += " (did you mean " + *close + "?)";
    message += "; systems: " + join(names, ", ") + " (files in " + (profiles_dir / "systems").string() + ")";
    throw InputError(message);
  }
  return load_system_file(profiles_dir / "systems" / (name + ".yaml"));
}

SystemSpec
load_system_file(const std::filesystem::path& file) {
  const auto doc = config::load_yaml_file(file, system_schema());
  SystemSpec spec;
  spec.name = doc["name"].get<std::string>();
  if (spec.name != file.stem().string())
    throw InputError(file.string() + ": name " + spec.name + " differs from the file name; make them equal");
  spec.description = doc["description"].get<std::string>();
  const auto& gpu = doc["gpu"];
  spec.gpu_name = gpu["name"].get<std::string>();
  spec.memory_gib = gpu["memory_gib"].get<double>();
  spec.memory_bandwidth_gbs = gpu["memory_bandwidth_gbs"].get<double>();
  spec.fp16_tflops = gpu["fp16_tflops"].get<double>();
  spec.bf16_tflops = gpu["bf16_tflops"].get<double>();
  spec.fp8_tflops = gpu["fp8_tflops"].get<double>();
  spec.int8_tops = gpu["int8_tops"].get<double>();
  spec.tdp_w = gpu.value("tdp_w", 0.0);
  const auto& node = doc["node"];
  spec.gpus_per_node = node["gpus_per_node"].get<int>();
  spec.intra_node_bandwidth_gbs = node["intra_node_bandwidth_gbs"].get<double>();
  spec.inter_node_bandwidth_gbs = node["inter_node_bandwidth_gbs"].get<double>();
  spec.collective_latency_us = node["collective_latency_us"].get<double>();
  spec.runtime_reserve_gib = doc["reserve"]["runtime_gib"].get<double>();
  spec.collective_reserve_mib = doc["reserve"]["collectives_mib"].get<double>();
  const auto& efficiency = doc["efficiency"];
  spec.efficiency.gemm = efficiency["gemm"].get<double>();
  spec.efficiency.attention = efficiency["attention"].get<double>();
  spec.efficiency.memory = efficiency["memory"].get<double>();
  spec.efficiency.decode_attention = efficiency.value("decode_attention", spec.efficiency.memory);
  spec.efficiency.communication = efficiency["communication"].get<double>();
  spec.efficiency.kernel_overhead_us = efficiency["kernel_overhead_us"].get<double>();
  spec.efficiency.calibrated = efficiency.value("calibrated", "");
  if (efficiency.contains("engine_attention"))
    for (const auto& [engine, kernels] : efficiency["engine_attention"].items())
      spec.efficiency.engine_attention[engine] = {kernels["prefill"].get<double>(), kernels["decode"].get<double>()};
  for (const auto& source : doc["sources"])
    spec.sources.push_back(source.get<std::string>());
  const auto positive = [&](double value, const char* key) {
    if (!(value > 0))
      throw InputError(file.string() + ": " + key + " must be greater than 0");
  };
  positive(spec.memory_gib, "gpu.memory_gib");
  positive(spec.memory_bandwidth_gbs, "gpu.memory_bandwidth_gbs");
  positive(spec.fp16_tflops, "gpu.fp16_tflops");
  for (const auto& [value, key] : {std::pair{spec.efficiency.gemm, "efficiency.gemm"},
                                   {spec.efficiency.attention, "efficiency.attention"},
                                   {spec.efficiency.decode_attention, "efficiency.decode_attention"},
                                   {spec.efficiency.memory, "efficiency.memory"},
                                   {spec.efficiency.communication, "efficiency.communication"}})
    if (!(value > 0 && value <= 1))
      throw InputError(file.string() + ": " + key + " must be in (0, 1]");
  for (const auto& [engine, kernels] : spec.efficiency.engine_attention)
    if (!(kernels.prefill > 0 && kernels.prefill <= 1 && kernels.decode > 0 && kernels.decode <= 1))
      throw InputError(file.string() + ": efficiency.engine_attention." + engine +
                       ": prefill and decode must be in (0, 1]");
  return spec;
}

AttentionEfficiency
DefaultEfficiency::attention_of(const std::string& engine) const {
  const auto fitted = engine_attention.find(engine);
  return fitted != engine_attention.end() ? fitted->second : AttentionEfficiency{attention, decode_attention};
}

} // namespace optkit::perf
