#include "model/safetensors_writer.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"

#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace optkit::model {

namespace {

std::string
header_json(const std::vector<TensorToWrite>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  nlohmann::ordered_json meta = {{"format", "pt"}};
  for (const auto& [key, value] : metadata)
    meta[key] = value;
  header["__metadata__"] = meta;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::uint64_t expected = dtype_size(t.dtype);
    for (const auto dim : t.shape)
      expected *= static_cast<std::uint64_t>(dim);
    if (expected != t.bytes.size())
      throw RuntimeFailure(
          fmt::format("tensor '{}' has {} bytes but its shape and dtype need {}", t.name, t.bytes.size(), expected));
    header[t.name] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + expected}}};
    offset += expected;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

} // namespace

void
write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  const std::string header = header_json(tensors, metadata);
  auto temporary = path;
  temporary += fmt::format(".tmp-{}", ::getpid());
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (!file)
    throw RuntimeFailure(fmt::format("{}: cannot create: {}", temporary.string(), errno_text(errno)));
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>((header.size() >> (8 * i)) & 0xff);
  bool ok = std::fwrite(length, 1, 8, file) == 8 && std::fwrite(header.data(), 1, header.size(), file) == header.size();
  for (const auto& t : tensors)
    ok = ok && (t.bytes.empty() || std::fwrite(t.bytes.data(), 1, t.bytes.size(), file) == t.bytes.size());
  ok = ok && std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int err = errno;
  ok = std::fclose(file) == 0 && ok;
  if (!ok) {
    std::filesystem::remove(temporary);
    throw RuntimeFailure(fmt::format("{}: write failed: {}", path.string(), errno_text(err)));
  }
  std::filesystem::rename(temporary, path);
}

std::vector<std::string>
write_safetensors_sharded(const std::filesystem::path& directory, const std::vector<TensorToWrite>& tensors,
                          std::uint64_t max_shard_bytes, const std::map<std::string, std::string>& metadata) {
  std::vector<std::vector<TensorToWrite>> shards(1);
  std::uint64_t shard_bytes = 0, total = 0;
  for (const auto& t : tensors) {
    if (!shards.back().empty() && shard_bytes + t.bytes.size() > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += t.bytes.size();
    total += t.bytes.size();
  }
  if (shards.size() == 1) {
    write_safetensors(directory / "model.safetensors", tensors, metadata);
    return {"model.safetensors"};
  }
  std::vector<std::string> names;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    names.push_back(fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, shards.size()));
    write_safetensors(directory / names.back(), shards[i], metadata);
    for (const auto& t : shards[i])
      weight_map[t.name] = names.back();
  }
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomic(directory / "model.safetensors.index.json", index.dump(2) + "\n");
  names.push_back("model.safetensors.index.json");
  return names;
}

void
TensorSet::add_view(std::string name, DType dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes) {
  m_tensors.push_back({std::move(name), dtype, std::move(shape), bytes});
}

void
TensorSet::add_bytes(std::string name, DType dtype, std::vector<std::int64_t> shape, std::vector<std::byte> bytes) {
  m_storage.push_back(std::make_unique<std::vector<std::byte>>(std::move(bytes)));
  m_tensors.push_back({std::move(name), dtype, std::move(shape), *m_storage.back()});
}

} // namespace optkit::model
