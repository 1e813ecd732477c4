// The GGUF format (ggml's docs/gguf.md), version 3, little-endian: the magic "GGUF", the version,
// the tensor and key counts (u64), the metadata key/value pairs (typed: integers, floats, bools,
// strings, arrays of them), one info per tensor (name, up to 4 dims in ggml order — ne[0] the
// contiguous one, so a Linear [out, in] is [in, out] — its ggml type and its offset in the data
// section), then, aligned to general.alignment (default 32), the data section.
//
// parse_gguf() validates everything before a byte of tensor data is trusted: the counts against
// the bytes that could hold them, every string and array inside the file, known value types, no
// nested arrays, no duplicate keys or tensor names, names under 64 bytes, 1 to 4 positive dims
// whose first is a whole number of blocks, types optkit reads, and aligned offsets whose tensors
// lie inside the data section without overlapping.
#pragma once

#include "model/ggml_types.hpp"
#include "model/mapped_file.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace optkit::model {

enum class GgufValueType : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

// A metadata value: its GGUF type (an array's element type beside it) and the value as JSON
// (a number, bool, string, or an array of them).
struct GgufValue {
  GgufValueType type = GgufValueType::u32;
  GgufValueType element_type = GgufValueType::u32; // arrays only
  nlohmann::json value;

  static GgufValue u32(std::uint32_t v) { return {GgufValueType::u32, GgufValueType::u32, v}; }
  static GgufValue f32(float v) { return {GgufValueType::f32, GgufValueType::u32, v}; }
  static GgufValue boolean(bool v) { return {GgufValueType::boolean, GgufValueType::u32, v}; }
  static GgufValue string(std::string v) { return {GgufValueType::string, GgufValueType::u32, std::move(v)}; }
  static GgufValue strings(std::vector<std::string> v) { return {GgufValueType::array, GgufValueType::string, v}; }
  static GgufValue i32s(std::vector<std::int32_t> v) { return {GgufValueType::array, GgufValueType::i32, v}; }
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::int64_t> dims; // ggml order: dims[0] is contiguous
  GgmlType type = GgmlType::f32;
  std::uint64_t offset = 0; // in the data section
  std::uint64_t bytes = 0;

  std::int64_t element_count() const;
  // Rows of a 2-D tensor (dims[1]; 1 for a vector) and values per row (dims[0]).
  std::int64_t rows() const;
  std::int64_t row_values() const { return dims.at(0); }
};

struct GgufHeader {
  std::uint32_t version = 3;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors; // in file order
  std::uint64_t alignment = 32;
  std::uint64_t data_offset = 0; // where the data section starts in the file
};

inline constexpr std::uint64_t kGgufDefaultAlignment = 32;

// Validates `file` (the whole file's bytes); `source` names it in errors. Throws InputError.
GgufHeader parse_gguf(std::span<const std::byte> file, const std::string& source);

// Whether `path` is a file that starts with the GGUF magic.
bool is_gguf_file(const std::filesystem::path& path);

// A GGUF file in memory (model/mapped_file.hpp), validated on open.
class GgufFile {
public:
  explicit GgufFile(const std::filesystem::path& path, LoadMode mode = LoadMode::map);

  const std::filesystem::path& path() const { return m_path; }
  const GgufHeader& header() const { return m_header; }
  // nullptr when absent.
  const GgufValue* find(const std::string& key) const;
  // The value of `key` as T; InputError naming the file and key when absent or of another kind.
  std::uint32_t require_u32(const std::string& key) const;
  float require_f32(const std::string& key) const;
  std::string require_string(const std::string& key) const;
  // nullptr when absent.
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  std::span<const std::byte> tensor_bytes(const GgufTensorInfo& tensor) const;
  // Mapped pages of a tensor (or of a part of one) leave the resident set (MappedFile::release).
  void release(std::span<const std::byte> bytes) const { m_file.release(bytes); }
  std::uint64_t file_bytes() const { return m_file.bytes().size(); }

private:
  std::filesystem::path m_path;
  MappedFile m_file;
  GgufHeader m_header;
  std::map<std::string, std::size_t, std::less<>> m_index;
};

// Writes a GGUF file: every key and tensor info first (add_tensor computes the offsets), then
// the tensors' bytes in the order they were added, each tensor's in as many pieces as the caller
// likes; finish() checks that every tensor got exactly its bytes.
class GgufWriter {
public:
  explicit GgufWriter(const std::filesystem::path& path);
  void set(const std::string& key, GgufValue value);
  void add_tensor(const std::string& name, std::vector<std::int64_t> dims, GgmlType type);
  // The next bytes of the tensor being written (the header goes out before the first piece).
  void write(std::span<const std::byte> piece);
  // Bytes written in all.
  std::uint64_t finish();

private:
  void write_header();
  void pad_to_alignment();

  std::filesystem::path m_path;
  std::ofstream m_out;
  std::map<std::string, GgufValue> m_metadata;
  std::vector<std::string> m_key_order;
  std::vector<GgufTensorInfo> m_tensors;
  std::uint64_t m_data_bytes = 0;
  bool m_header_written = false;
  std::size_t m_current = 0;         // the tensor being written
  std::uint64_t m_current_bytes = 0; // of it so far
  std::uint64_t m_written = 0;
};

} // namespace optkit::model
