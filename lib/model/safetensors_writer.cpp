#include "model/safetensors_writer.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"

#include <cstdio>
#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace optkit::model {

namespace {

std::string
header_json(const std::vector<TensorSpec>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  nlohmann::ordered_json meta = {{"format", "pt"}};
  for (const auto& [key, value] : metadata)
    meta[key] = value;
  header["__metadata__"] = meta;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    const auto size = t.byte_size();
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// The 8-byte little-endian header length followed by the header.
std::string
header_block(const std::string& header) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header;
}

std::vector<TensorSpec>
specs_of(const std::vector<TensorToWrite>& tensors) {
  std::vector<TensorSpec> specs;
  for (const auto& t : tensors) {
    TensorSpec spec{t.name, t.dtype, t.shape};
    if (spec.byte_size() != t.bytes.size())
      throw RuntimeFailure(fmt::format("tensor '{}' has {} bytes but its shape and dtype need {}", t.name,
                                       t.bytes.size(), spec.byte_size()));
    specs.push_back(std::move(spec));
  }
  return specs;
}

// Tensors in order, a new shard begun when the next tensor would take this one past the limit
// (a tensor larger than the limit gets a shard of its own): transformers' rule.
std::vector<std::vector<std::size_t>>
plan_shards(const std::vector<TensorSpec>& tensors, std::uint64_t max_shard_bytes) {
  std::vector<std::vector<std::size_t>> shards(1);
  std::uint64_t shard_bytes = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto size = tensors[i].byte_size();
    if (!shards.back().empty() && shard_bytes + size > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(i);
    shard_bytes += size;
  }
  return shards;
}

void
pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::filesystem::path& path) {
  const auto* bytes = static_cast<const char*>(data);
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::pwrite(fd, bytes + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw RuntimeFailure(fmt::format("{}: write failed: {}", path.string(), errno_text(n < 0 ? errno : EIO)));
    done += static_cast<std::size_t>(n);
  }
}

} // namespace

std::uint64_t
TensorSpec::byte_size() const {
  std::uint64_t size = dtype_size(dtype);
  for (const auto dim : shape)
    size *= static_cast<std::uint64_t>(dim);
  return size;
}

void
write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  const std::string block = header_block(header_json(specs_of(tensors), metadata));
  auto temporary = path;
  temporary += fmt::format(".tmp-{}", ::getpid());
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (!file)
    throw RuntimeFailure(fmt::format("{}: cannot create: {}", temporary.string(), errno_text(errno)));
  bool ok = std::fwrite(block.data(), 1, block.size(), file) == block.size();
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
  ShardedSafetensorsWriter writer(directory, specs_of(tensors), max_shard_bytes, metadata);
  for (const auto& t : tensors)
    writer.write(t.name, t.bytes);
  return writer.finish();
}

ShardedSafetensorsWriter::ShardedSafetensorsWriter(const std::filesystem::path& directory,
                                                   std::vector<TensorSpec> tensors, std::uint64_t max_shard_bytes,
                                                   const std::map<std::string, std::string>& metadata,
                                                   const std::string& single_file)
    : m_directory(directory), m_tensors(std::move(tensors)) {
  try {
    open_shards(plan_shards(m_tensors, max_shard_bytes), metadata, single_file);
  } catch (...) {
    abandon();
    throw;
  }
}

void
ShardedSafetensorsWriter::open_shards(const std::vector<std::vector<std::size_t>>& plan,
                                      const std::map<std::string, std::string>& metadata,
                                      const std::string& single_file) {
  m_shards.resize(plan.size());
  for (std::size_t s = 0; s < plan.size(); ++s) {
    m_names.push_back(plan.size() == 1 ? single_file
                                       : fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, plan.size()));
    auto& shard = m_shards[s];
    shard.path = m_directory / m_names.back();
    shard.temporary = shard.path;
    shard.temporary += fmt::format(".tmp-{}", ::getpid());
    std::vector<TensorSpec> specs;
    for (const auto i : plan[s])
      specs.push_back(m_tensors[i]);
    const std::string block = header_block(header_json(specs, metadata));
    shard.fd = ::open(shard.temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (shard.fd < 0)
      throw RuntimeFailure(fmt::format("{}: cannot create: {}", shard.temporary.string(), errno_text(errno)));
    pwrite_all(shard.fd, block.data(), block.size(), 0, shard.path);
    std::uint64_t offset = block.size();
    for (const auto i : plan[s]) {
      const auto size = m_tensors[i].byte_size();
      if (!m_slots.emplace(m_tensors[i].name, Slot{s, offset, size, 0}).second)
        throw RuntimeFailure(
            fmt::format("tensor '{}' is planned twice for {}", m_tensors[i].name, m_directory.string()));
      offset += size;
      shard.pending += size;
    }
    if (shard.pending == 0)
      complete(shard);
  }
}

ShardedSafetensorsWriter::~ShardedSafetensorsWriter() {
  abandon();
}

void
ShardedSafetensorsWriter::abandon() {
  for (auto& shard : m_shards)
    if (shard.fd >= 0) {
      ::close(shard.fd);
      shard.fd = -1;
      std::error_code ignored;
      std::filesystem::remove(shard.temporary, ignored);
    }
}

ShardedSafetensorsWriter::Slot&
ShardedSafetensorsWriter::slot(const std::string& name) {
  const auto it = m_slots.find(name);
  if (it == m_slots.end())
    throw RuntimeFailure(
        fmt::format("tensor '{}' is not among the tensors planned for {}", name, m_directory.string()));
  return it->second;
}

void
ShardedSafetensorsWriter::write(const std::string& name, std::span<const std::byte> bytes) {
  const auto& s = slot(name);
  if (s.done > 0)
    throw RuntimeFailure(fmt::format("tensor '{}' was written twice", name));
  if (bytes.size() != s.size)
    throw RuntimeFailure(
        fmt::format("tensor '{}' has {} bytes but its shape and dtype need {}", name, bytes.size(), s.size));
  append(name, bytes);
}

void
ShardedSafetensorsWriter::append(const std::string& name, std::span<const std::byte> bytes) {
  auto& s = slot(name);
  if (s.done + bytes.size() > s.size)
    throw RuntimeFailure(
        fmt::format("tensor '{}' is {} bytes: {} more after {} would run past it", name, s.size, bytes.size(), s.done));
  auto& shard = m_shards[s.shard];
  pwrite_all(shard.fd, bytes.data(), bytes.size(), s.offset + s.done, shard.path);
  s.done += bytes.size();
  shard.pending -= bytes.size();
  if (shard.pending == 0 && shard.fd >= 0)
    complete(shard);
}

bool
ShardedSafetensorsWriter::written(const std::string& name) const {
  const auto it = m_slots.find(name);
  return it != m_slots.end() && it->second.done == it->second.size;
}

void
ShardedSafetensorsWriter::complete(Shard& shard) {
  if (::fsync(shard.fd) != 0)
    throw RuntimeFailure(fmt::format("{}: write failed: {}", shard.path.string(), errno_text(errno)));
  ::close(shard.fd);
  shard.fd = -1;
  std::filesystem::rename(shard.temporary, shard.path);
}

std::vector<std::string>
ShardedSafetensorsWriter::finish() {
  for (const auto& spec : m_tensors)
    if (!written(spec.name))
      throw RuntimeFailure(fmt::format("tensor '{}' of {} was never written", spec.name, m_directory.string()));
  auto names = m_names;
  if (m_shards.size() == 1)
    return names;
  std::uint64_t total = 0;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (const auto& spec : m_tensors) {
    total += spec.byte_size();
    weight_map[spec.name] = m_names[m_slots.at(spec.name).shard];
  }
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomic(m_directory / "model.safetensors.index.json", index.dump(2) + "\n");
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
