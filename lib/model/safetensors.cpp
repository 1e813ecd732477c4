#include "model/safetensors.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace optkit::model {

namespace {

using nlohmann::json;

[[noreturn]] void
fail(const std::string& source, const std::string& what) {
  throw InputError(source + ": invalid safetensors file: " + what);
}

bool
multiply_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return __builtin_mul_overflow(a, b, &out);
}

TensorInfo
parse_tensor_entry(const std::string& source, const std::string& name, const json& entry) {
  const std::string where = "tensor '" + name + "'";
  if (!entry.is_object())
    fail(source, where + " is not an object");
  for (const auto& [key, value] : entry.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail(source, where + " has unknown field '" + key + "'");
  if (!entry.contains("dtype") || !entry["dtype"].is_string())
    fail(source, where + " has no string 'dtype'");
  TensorInfo info;
  info.name = name;
  const auto dtype_text = entry["dtype"].get<std::string>();
  const auto dtype = parse_dtype(dtype_text);
  if (!dtype)
    fail(source, where + " has unsupported dtype '" + dtype_text +
                     "' (supported: " + std::string(supported_dtype_names()) + ")");
  info.dtype = *dtype;
  if (!entry.contains("shape") || !entry["shape"].is_array())
    fail(source, where + " has no 'shape' array");
  for (const auto& dim : entry["shape"]) {
    if (!dim.is_number_unsigned())
      fail(source, where + " has a shape entry that is not a non-negative integer");
    info.shape.push_back(static_cast<std::int64_t>(std::min<std::uint64_t>(dim.get<std::uint64_t>(), INT64_MAX)));
  }
  const auto& offsets = entry.contains("data_offsets") ? entry["data_offsets"] : json();
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail(source, where + " needs 'data_offsets' [begin, end] of non-negative integers");
  info.begin = offsets[0].get<std::uint64_t>();
  info.end = offsets[1].get<std::uint64_t>();
  if (info.end < info.begin)
    fail(source, where + " has data_offsets end before begin");
  std::uint64_t bytes = dtype_size(info.dtype);
  for (const auto dim : info.shape)
    if (multiply_overflows(bytes, static_cast<std::uint64_t>(dim), bytes))
      fail(source, where + " has a shape whose byte size overflows");
  if (bytes != info.end - info.begin)
    fail(source, where + " shape x dtype is " + std::to_string(bytes) + " bytes but data_offsets span " +
                     std::to_string(info.end - info.begin));
  return info;
}

} // namespace

std::uint64_t
TensorInfo::element_count() const {
  std::uint64_t count = 1;
  for (const auto dim : shape)
    count *= static_cast<std::uint64_t>(dim);
  return count;
}

SafetensorsHeader
parse_safetensors(std::span<const std::byte> file, const std::string& source) {
  if (file.size() < 8)
    fail(source, "shorter than the 8-byte header length (truncated?)");
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i)
    header_bytes = (header_bytes << 8) | static_cast<std::uint8_t>(file[static_cast<std::size_t>(i)]);
  if (header_bytes > kMaxSafetensorsHeaderBytes)
    fail(source, "header length " + std::to_string(header_bytes) + " exceeds the " +
                     std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  if (header_bytes > file.size() - 8)
    fail(source, "header length " + std::to_string(header_bytes) + " runs past the end of the " +
                     std::to_string(file.size()) + "-byte file (truncated?)");
  const auto* text = reinterpret_cast<const char*>(file.data() + 8);
  if (header_bytes == 0 || text[0] != '{')
    fail(source, "header does not start with a JSON object");

  std::set<std::string> seen_keys;
  const json::parser_callback_t reject_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !seen_keys.insert(parsed.get<std::string>()).second)
      fail(source, "header names '" + parsed.get<std::string>() + "' twice");
    return true;
  };
  json header;
  try {
    header = json::parse(text, text + header_bytes, reject_duplicates);
  } catch (const json::exception& e) {
    fail(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object())
    fail(source, "header is not a JSON object");

  SafetensorsHeader result;
  result.data_offset = 8 + header_bytes;
  const std::uint64_t data_bytes = file.size() - result.data_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        fail(source, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          fail(source, "__metadata__ value for '" + key + "' is not a string");
        result.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    result.tensors.push_back(parse_tensor_entry(source, name, entry));
  }

  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : result.tensors)
    by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t expected = 0;
  for (const auto* t : by_offset) {
    if (t->begin < expected)
      fail(source, "tensor '" + t->name + "' overlaps the tensor before it");
    if (t->begin > expected)
      fail(source, "bytes " + std::to_string(expected) + ".." + std::to_string(t->begin) +
                       " of the data section belong to no tensor");
    if (t->end > data_bytes)
      fail(source, "tensor '" + t->name + "' ends at byte " + std::to_string(t->end) + " but the data section has " +
                       std::to_string(data_bytes) + " (truncated?)");
    expected = t->end;
  }
  if (expected != data_bytes)
    fail(source, "data section has " + std::to_string(data_bytes) + " bytes but the tensors cover " +
                     std::to_string(expected) + " (truncated or trailing garbage)");
  return result;
}

namespace {

// The file's bytes in anonymous memory advised onto transparent huge pages, read-only once filled.
const std::byte*
read_into_memory(int fd, std::size_t size, const std::filesystem::path& path) {
  void* memory = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED)
    throw RuntimeFailure(path.string() + ": cannot allocate " + std::to_string(size) +
                         " bytes to read it into: " + errno_text(errno));
  ::madvise(memory, size, MADV_HUGEPAGE); // advice only: without THP the copy still works
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, static_cast<char*>(memory) + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::munmap(memory, size);
      throw InputError(path.string() + ": cannot read: " +
                       (n < 0 ? errno_text(err) : "the file ended early (truncated while reading?)"));
    }
    done += static_cast<std::size_t>(n);
  }
  ::mprotect(memory, size, PROT_READ);
  return static_cast<const std::byte*>(memory);
}

} // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path, LoadMode mode) : m_path(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError(path.string() + ": cannot open: " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw InputError(path.string() + ": cannot stat: " + errno_text(err));
  }
  m_size = static_cast<std::size_t>(st.st_size);
  if (m_size > 0 && mode == LoadMode::read) {
    try {
      m_data = read_into_memory(fd, m_size, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
  } else if (m_size > 0) {
    void* mapped = ::mmap(nullptr, m_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw RuntimeFailure(path.string() + ": cannot map into memory: " + errno_text(err));
    }
    // Advice only: where the filesystem caches files in large folios (ext4, XFS on recent
    // kernels), pages read under it come in 2 MiB folios mapped whole, still shared.
    ::madvise(mapped, m_size, MADV_HUGEPAGE);
    m_data = static_cast<const std::byte*>(mapped);
    m_mapped = true;
  }
  ::close(fd);
  try {
    m_header = parse_safetensors({m_data, m_size}, path.string());
  } catch (...) {
    if (m_data)
      ::munmap(const_cast<std::byte*>(m_data), m_size);
    throw;
  }
  for (std::size_t i = 0; i < m_header.tensors.size(); ++i)
    m_index.emplace(m_header.tensors[i].name, i);
}

SafetensorsFile::~SafetensorsFile() {
  if (m_data)
    ::munmap(const_cast<std::byte*>(m_data), m_size);
}

TensorView
SafetensorsFile::find(const std::string& name) const {
  const auto it = m_index.find(name);
  if (it == m_index.end())
    return {};
  const auto& info = m_header.tensors[it->second];
  return {&info, {m_data + m_header.data_offset + info.begin, static_cast<std::size_t>(info.end - info.begin)}};
}

void
SafetensorsFile::release(std::span<const std::byte> bytes) const {
  if (!m_mapped || bytes.empty() || bytes.data() < m_data || bytes.data() + bytes.size() > m_data + m_size)
    return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(bytes.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size()) / page * page;
  if (end > begin) // advice only: a failure leaves the pages resident, nothing else
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

} // namespace optkit::model
