#include "model/weight_store.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/gguf_model.hpp"
#include "model/gguf_names.hpp"
#include "model/layer_tensors.hpp"

#include <fmt/format.h>

namespace optkit::model {

WeightStore::WeightStore(const std::filesystem::path& model_dir, LoadMode mode) : m_dir(model_dir) {
  if (is_gguf_model(model_dir)) {
    open_gguf(mode);
    return;
  }
  const auto index_path = model_dir / "model.safetensors.index.json";
  const auto single_path = model_dir / "model.safetensors";
  if (std::filesystem::exists(index_path)) {
    const auto index = read_json_file(index_path);
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      throw InputError(index_path.string() + ": has no 'weight_map' object");
    std::map<std::string, const SafetensorsFile*> by_file;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string())
        throw InputError(index_path.string() + ": weight_map entry '" + tensor + "' is not a file name");
      const auto name = file.get<std::string>();
      if (name.find('/') != std::string::npos || name == ".." || name.empty())
        throw InputError(index_path.string() + ": weight_map names '" + name + "', which is not a file in the folder");
      if (!by_file.contains(name)) {
        m_files.push_back(model_dir / name);
        m_shards.push_back(std::make_unique<SafetensorsFile>(model_dir / name, mode));
        by_file[name] = m_shards.back().get();
      }
      const auto* shard = by_file[name];
      if (!shard->find(tensor).info)
        throw InputError(index_path.string() + ": maps '" + tensor + "' to " + name + ", which does not contain it");
      m_owner.emplace(tensor, shard);
    }
    for (const auto& shard : m_shards)
      for (const auto& t : shard->header().tensors)
        if (!m_owner.contains(t.name))
          throw InputError(shard->path().string() + ": tensor '" + t.name + "' is missing from " +
                           index_path.filename().string());
  } else if (std::filesystem::exists(single_path)) {
    m_files.push_back(single_path);
    m_shards.push_back(std::make_unique<SafetensorsFile>(single_path, mode));
    for (const auto& t : m_shards.back()->header().tensors)
      m_owner.emplace(t.name, m_shards.back().get());
  } else {
    throw InputError(model_dir.string() + ": no model.safetensors or model.safetensors.index.json (is this a Hugging "
                                          "Face model folder?)");
  }
}

namespace {

// A mixture of experts' GGUF tensors and the HF weights they hold: the router, and each stacked
// projection's experts in order.
std::map<std::string, std::vector<std::string>>
moe_tensor_names(const ModelConfig& config) {
  std::map<std::string, std::vector<std::string>> out;
  for (std::int64_t l = 0; l < config.num_layers; ++l)
    if (config.is_moe_layer(l))
      for (auto& t : gguf_moe_tensors(config, l))
        out[t.gguf] = std::move(t.hf);
  return out;
}

} // namespace

void
WeightStore::open_gguf(LoadMode mode) {
  m_gguf = std::make_unique<GgufFile>(m_dir, mode);
  m_files.push_back(m_dir);
  const auto config = gguf_model_config(*m_gguf);
  m_gguf_head_dim = config.head_dim;
  m_gguf_architecture = m_gguf->require_string("general.architecture");
  const auto moe = moe_tensor_names(config);
  for (const auto& t : m_gguf->header().tensors) {
    if (const auto it = moe.find(t.name); it != moe.end()) {
      const bool stacked = t.dims.size() == 3;
      if (stacked && t.dims[2] != static_cast<std::int64_t>(it->second.size()))
        throw InputError(fmt::format("{}: {} stacks {} experts; the model has {}", m_dir.string(), t.name, t.dims[2],
                                     it->second.size()));
      for (std::size_t e = 0; e < it->second.size(); ++e)
        add_gguf_entry(t, it->second[e], stacked ? static_cast<std::int64_t>(e) : -1);
      continue;
    }
    if (const auto hf = hf_tensor_name(t.name))
      add_gguf_entry(t, *hf, -1);
    // else a GGUF-only tensor (rope_freqs), read from the file itself
  }
}

void
WeightStore::add_gguf_entry(const GgufTensorInfo& t, std::string hf_name, std::int64_t expert) {
  GgufEntry entry;
  entry.tensor = &t;
  entry.expert = expert;
  entry.info.name = hf_name;
  entry.info.shape.assign(t.dims.rbegin() + (expert >= 0 ? 1 : 0), t.dims.rend());
  const bool float_type = t.type == GgmlType::f32 || t.type == GgmlType::f16 || t.type == GgmlType::bf16;
  entry.info.dtype = t.type == GgmlType::f16 ? DType::f16 : t.type == GgmlType::bf16 ? DType::bf16 : DType::f32;
  entry.info.end = expert >= 0 ? t.bytes / static_cast<std::uint64_t>(t.dims[2]) : t.bytes;
  entry.plain = float_type && !gguf_rope_permuted(m_gguf_architecture, hf_name);
  m_gguf_tensors.emplace(std::move(hf_name), std::move(entry));
}

std::span<const std::byte>
WeightStore::entry_bytes(const GgufEntry& entry) const {
  const auto bytes = m_gguf->tensor_bytes(*entry.tensor);
  if (entry.expert < 0)
    return bytes;
  const auto size = bytes.size() / static_cast<std::size_t>(entry.tensor->dims[2]);
  return bytes.subspan(static_cast<std::size_t>(entry.expert) * size, size);
}

void
WeightStore::require_safetensors(const char* what) const {
  if (m_gguf)
    throw InputError(
        fmt::format("{}: {} reads Hugging Face safetensors folders, not GGUF files", m_dir.string(), what));
}

std::optional<GgufMatrix>
WeightStore::gguf_matrix(const std::string& name) const {
  const auto it = m_gguf_tensors.find(name);
  if (it == m_gguf_tensors.end())
    return std::nullopt;
  const auto& t = *it->second.tensor;
  return GgufMatrix{t.type, entry_bytes(it->second), it->second.expert >= 0 ? t.dims[1] : t.rows(), t.row_values(),
                    gguf_rope_permuted(m_gguf_architecture, name) ? m_gguf_head_dim : 0};
}

TensorView
WeightStore::find(const std::string& name) const {
  if (m_gguf) {
    const auto it = m_gguf_tensors.find(name);
    if (it == m_gguf_tensors.end() || !it->second.plain)
      return {};
    return {&it->second.info, entry_bytes(it->second)};
  }
  const auto it = m_owner.find(name);
  return it == m_owner.end() ? TensorView{} : it->second->find(name);
}

TensorView
WeightStore::require(const std::string& name) const {
  auto view = find(name);
  if (!view.info)
    throw InputError(m_dir.string() + ": tensor '" + name + "' is missing from the weights");
  return view;
}

std::vector<std::string>
WeightStore::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : m_gguf_tensors)
    out.push_back(name);
  for (const auto& [name, file] : m_owner)
    out.push_back(name);
  return out;
}

void
WeightStore::release(const std::string& name) const {
  if (const auto it = m_gguf_tensors.find(name); it != m_gguf_tensors.end())
    m_gguf->release(entry_bytes(it->second));
  if (const auto it = m_owner.find(name); it != m_owner.end())
    it->second->release(it->second->find(name).bytes);
}

std::vector<float>
WeightStore::rows_as_floats(const std::string& name, std::int64_t first, std::int64_t count) const {
  require_safetensors("reading rows of a tensor");
  const auto view = require(name);
  if (view.shape().size() != 2 || first < 0 || count < 0 || first + count > view.shape()[0])
    throw InputError(fmt::format("{}: tensor '{}' has no rows [{}, {})", m_dir.string(), name, first, first + count));
  const auto cols = static_cast<std::size_t>(view.shape()[1]);
  const auto element = dtype_size(view.dtype());
  const auto rows = view.bytes.subspan(static_cast<std::size_t>(first) * cols * element,
                                       static_cast<std::size_t>(count) * cols * element);
  std::vector<float> out(static_cast<std::size_t>(count) * cols);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = element_as_float(view.dtype(), rows.data(), i);
  m_owner.find(name)->second->release(rows);
  return out;
}

void
WeightStore::stream(const std::string& name, const std::function<void(std::span<const std::byte>)>& write,
                    std::size_t piece_bytes) const {
  require_safetensors("streaming a tensor");
  const auto view = require(name);
  const auto* owner = m_owner.find(name)->second;
  for (std::size_t at = 0; at < view.bytes.size(); at += piece_bytes) {
    const auto piece = view.bytes.subspan(at, std::min(piece_bytes, view.bytes.size() - at));
    write(piece);
    owner->release(piece);
  }
}

std::uint64_t
WeightStore::element_count() const {
  std::uint64_t total = 0;
  for (const auto& [name, entry] : m_gguf_tensors)
    total += static_cast<std::uint64_t>(entry.tensor->element_count());
  for (const auto& shard : m_shards)
    for (const auto& t : shard->header().tensors)
      total += t.element_count();
  return total;
}

std::uint64_t
WeightStore::file_bytes() const {
  std::uint64_t total = 0;
  for (const auto& file : m_files)
    total += std::filesystem::file_size(file);
  return total;
}

DType
WeightStore::float_dtype() const {
  const auto probe = find("model.layers.0.self_attn.q_proj.weight");
  if (probe.info && (probe.dtype() == DType::bf16 || probe.dtype() == DType::f16))
    return probe.dtype();
  return DType::f32;
}

} // namespace optkit::model
