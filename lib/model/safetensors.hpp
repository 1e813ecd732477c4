// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON naming every
// tensor's dtype, shape and [begin, end) byte span in the data section that follows.
//
// parse_safetensors() validates everything before any byte of tensor data is trusted: the header
// length bound, the JSON, known dtypes, shape x dtype size = span, spans inside the file, no
// duplicate names, and spans that tile the data section exactly (no overlap, no holes).
#pragma once

#include "model/dtype.hpp"
#include "model/mapped_file.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace optkit::model {

inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0; // byte offsets into the data section
  std::uint64_t end = 0;

  std::uint64_t element_count() const;
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors; // in header order
  std::map<std::string, std::string> metadata;
  std::uint64_t data_offset = 0; // 8 + N: where the data section starts in the file
};

// Validates `file` (the whole file's bytes); `source` names it in error messages. Throws
// InputError on any defect.
SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& source);

// A read-only view of one tensor's bytes inside a mapped file.
struct TensorView {
  const TensorInfo* info = nullptr;
  std::span<const std::byte> bytes;

  DType dtype() const { return info->dtype; }
  const std::vector<std::int64_t>& shape() const { return info->shape; }
  std::uint64_t element_count() const { return info->element_count(); }
  float at(std::size_t index) const { return element_as_float(info->dtype, bytes.data(), index); }
  // Every element widened to fp32.
  std::vector<float> to_floats() const {
    std::vector<float> out(element_count());
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = at(i);
    return out;
  }
};

// A safetensors file in memory (see LoadMode), validated on open.
class SafetensorsFile {
public:
  explicit SafetensorsFile(const std::filesystem::path& path, LoadMode mode = LoadMode::map);
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return m_path; }
  const SafetensorsHeader& header() const { return m_header; }
  // nullptr-info view when absent.
  TensorView find(const std::string& name) const;
  // Mapped: the whole pages of `bytes` (a part of this file's tensors) leave this process's
  // resident set (they stay in the page cache and come back if touched again), so a model streamed
  // layer by layer holds one layer at a time. Read into memory, or bytes outside the file: nothing.
  void release(std::span<const std::byte> bytes) const;

private:
  std::filesystem::path m_path;
  MappedFile m_file;
  SafetensorsHeader m_header;
  std::map<std::string, std::size_t, std::less<>> m_index;
};

} // namespace optkit::model
