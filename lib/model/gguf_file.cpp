#include "model/gguf_file.hpp"

#include "core/error.hpp"
#include "model/unicode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace optkit::model {

namespace {

constexpr std::uint32_t kMagic = 0x46554747; // "GGUF" read as a little-endian u32
constexpr std::size_t kMaxNameBytes = 63;    // tensor names are shorter than 64 bytes
constexpr int kMaxDims = 4;

[[noreturn]] void
fail(const std::string& source, const std::string& what) {
  throw InputError(source + ": invalid GGUF file: " + what);
}

// Reads little-endian values off the file's bytes, failing (naming what it was reading) at
// the end of the file.
class Cursor {
public:
  Cursor(std::span<const std::byte> bytes, const std::string& source) : m_bytes(bytes), m_source(source) {}

  template <typename T> T read(const char* what) {
    T value;
    need(sizeof(T), what);
    std::memcpy(&value, m_bytes.data() + m_pos, sizeof(T));
    m_pos += sizeof(T);
    return value;
  }

  std::string read_string(const char* what) {
    const auto length = read<std::uint64_t>(what);
    need(length, what);
    std::string s(reinterpret_cast<const char*>(m_bytes.data() + m_pos), static_cast<std::size_t>(length));
    m_pos += static_cast<std::size_t>(length);
    return s;
  }

  std::size_t position() const { return m_pos; }
  std::size_t remaining() const { return m_bytes.size() - m_pos; }

private:
  void need(std::uint64_t bytes, const char* what) {
    if (bytes > remaining())
      fail(m_source,
           fmt::format("the file ends inside {} (at byte {} of {}; truncated?)", what, m_pos, m_bytes.size()));
  }

  std::span<const std::byte> m_bytes;
  const std::string& m_source;
  std::size_t m_pos = 0;
};

std::size_t
scalar_size(GgufValueType type) {
  switch (type) {
  case GgufValueType::u8:
  case GgufValueType::i8:
  case GgufValueType::boolean:
    return 1;
  case GgufValueType::u16:
  case GgufValueType::i16:
    return 2;
  case GgufValueType::u32:
  case GgufValueType::i32:
  case GgufValueType::f32:
    return 4;
  case GgufValueType::u64:
  case GgufValueType::i64:
  case GgufValueType::f64:
    return 8;
  case GgufValueType::string:
    return 8; // at least its length
  case GgufValueType::array:
    return 12; // at least its element type and count
  }
  return 0;
}

bool
known_value_type(std::uint32_t id) {
  return id <= static_cast<std::uint32_t>(GgufValueType::f64);
}

nlohmann::json
read_scalar(Cursor& in, GgufValueType type, const std::string& source, const std::string& key) {
  const char* what = "a metadata value";
  switch (type) {
  case GgufValueType::u8:
    return in.read<std::uint8_t>(what);
  case GgufValueType::i8:
    return in.read<std::int8_t>(what);
  case GgufValueType::u16:
    return in.read<std::uint16_t>(what);
  case GgufValueType::i16:
    return in.read<std::int16_t>(what);
  case GgufValueType::u32:
    return in.read<std::uint32_t>(what);
  case GgufValueType::i32:
    return in.read<std::int32_t>(what);
  case GgufValueType::f32:
    return in.read<float>(what);
  case GgufValueType::u64:
    return in.read<std::uint64_t>(what);
  case GgufValueType::i64:
    return in.read<std::int64_t>(what);
  case GgufValueType::f64:
    return in.read<double>(what);
  case GgufValueType::boolean: {
    const auto b = in.read<std::uint8_t>(what);
    if (b > 1)
      fail(source, fmt::format("key '{}': a bool of value {}", key, b));
    return b == 1;
  }
  case GgufValueType::string: {
    auto s = in.read_string("a metadata string");
    if (repair_utf8(s) != s) // GGUF strings are UTF-8 (and JSON holds nothing else)
      fail(source, fmt::format("key '{}': a string that is not UTF-8", key));
    return s;
  }
  case GgufValueType::array:
    break;
  }
  fail(source, fmt::format("key '{}': nested arrays are not part of GGUF", key));
}

GgufValue
read_value(Cursor& in, const std::string& source, const std::string& key) {
  const auto type_id = in.read<std::uint32_t>("a metadata value type");
  if (!known_value_type(type_id))
    fail(source, fmt::format("key '{}' has value type {}, which GGUF does not define", key, type_id));
  GgufValue value;
  value.type = static_cast<GgufValueType>(type_id);
  if (value.type != GgufValueType::array) {
    value.value = read_scalar(in, value.type, source, key);
    return value;
  }
  const auto element_id = in.read<std::uint32_t>("an array's element type");
  if (!known_value_type(element_id))
    fail(source, fmt::format("key '{}': array element type {}, which GGUF does not define", key, element_id));
  value.element_type = static_cast<GgufValueType>(element_id);
  const auto count = in.read<std::uint64_t>("an array's length");
  if (value.element_type == GgufValueType::array)
    fail(source, fmt::format("key '{}': nested arrays are not part of GGUF", key));
  if (count > in.remaining() / scalar_size(value.element_type))
    fail(source,
         fmt::format("key '{}': an array of {} elements cannot fit in the {} bytes left", key, count, in.remaining()));
  value.value = nlohmann::json::array();
  for (std::uint64_t i = 0; i < count; ++i)
    value.value.push_back(read_scalar(in, value.element_type, source, key));
  return value;
}

GgufTensorInfo
read_tensor_info(Cursor& in, const std::string& source) {
  GgufTensorInfo t;
  t.name = in.read_string("a tensor name");
  if (t.name.empty() || t.name.size() > kMaxNameBytes)
    fail(source, fmt::format("a tensor name of {} bytes (1 to {} allowed)", t.name.size(), kMaxNameBytes));
  const auto n_dims = in.read<std::uint32_t>("a tensor's dimension count");
  if (n_dims < 1 || n_dims > kMaxDims)
    fail(source, fmt::format("tensor '{}' has {} dimensions (1 to {} allowed)", t.name, n_dims, kMaxDims));
  std::uint64_t elements = 1;
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    const auto dim = in.read<std::uint64_t>("a tensor's dimensions");
    if (dim == 0 || dim > (std::uint64_t{1} << 40) || __builtin_mul_overflow(elements, dim, &elements) ||
        elements > (std::uint64_t{1} << 50))
      fail(source, fmt::format("tensor '{}' has dimension {} of {}", t.name, d, dim));
    t.dims.push_back(static_cast<std::int64_t>(dim));
  }
  const auto type_id = in.read<std::uint32_t>("a tensor's type");
  const auto type = ggml_type_from_id(type_id);
  if (!type)
    fail(source, fmt::format("tensor '{}' has ggml type {}, which optkit does not read (it reads F32, F16, BF16, "
                             "Q8_0, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K)",
                             t.name, type_id));
  t.type = *type;
  if (t.dims[0] % ggml_block_values(t.type) != 0)
    fail(source, fmt::format("tensor '{}': {} values a row is not a whole number of {} blocks of {}", t.name, t.dims[0],
                             ggml_type_name(t.type), ggml_block_values(t.type)));
  t.bytes = elements / static_cast<std::uint64_t>(ggml_block_values(t.type)) *
            static_cast<std::uint64_t>(ggml_block_bytes(t.type));
  t.offset = in.read<std::uint64_t>("a tensor's offset");
  return t;
}

std::uint64_t
align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// The tensors lie inside the data section, aligned, none overlapping another.
void
check_tensor_layout(const GgufHeader& header, std::uint64_t data_bytes, const std::string& source) {
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : header.tensors) {
    if (t.offset % header.alignment != 0)
      fail(source, fmt::format("tensor '{}' starts at offset {}, not a multiple of the alignment {}", t.name, t.offset,
                               header.alignment));
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      fail(source, fmt::format("tensor '{}' ends past the end of the file (its {} bytes at offset {} of {}; "
                               "truncated?)",
                               t.name, t.bytes, t.offset, data_bytes));
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes > by_offset[i]->offset)
      fail(source, fmt::format("tensors '{}' and '{}' overlap", by_offset[i - 1]->name, by_offset[i]->name));
}

void
write_raw(std::ofstream& out, const void* data, std::size_t bytes) {
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

template <typename T>
void
write_le(std::ofstream& out, T value) {
  write_raw(out, &value, sizeof(T));
}

void
write_string(std::ofstream& out, const std::string& s) {
  write_le<std::uint64_t>(out, s.size());
  write_raw(out, s.data(), s.size());
}

void
write_scalar(std::ofstream& out, GgufValueType type, const nlohmann::json& v) {
  switch (type) {
  case GgufValueType::u8:
    return write_le(out, v.get<std::uint8_t>());
  case GgufValueType::i8:
    return write_le(out, v.get<std::int8_t>());
  case GgufValueType::u16:
    return write_le(out, v.get<std::uint16_t>());
  case GgufValueType::i16:
    return write_le(out, v.get<std::int16_t>());
  case GgufValueType::u32:
    return write_le(out, v.get<std::uint32_t>());
  case GgufValueType::i32:
    return write_le(out, v.get<std::int32_t>());
  case GgufValueType::f32:
    return write_le(out, v.get<float>());
  case GgufValueType::u64:
    return write_le(out, v.get<std::uint64_t>());
  case GgufValueType::i64:
    return write_le(out, v.get<std::int64_t>());
  case GgufValueType::f64:
    return write_le(out, v.get<double>());
  case GgufValueType::boolean:
    return write_le<std::uint8_t>(out, v.get<bool>() ? 1 : 0);
  case GgufValueType::string:
    return write_string(out, v.get<std::string>());
  case GgufValueType::array:
    break;
  }
  throw std::logic_error("GgufWriter: a nested array");
}

} // namespace

std::int64_t
GgufTensorInfo::element_count() const {
  std::int64_t n = 1;
  for (const auto d : dims)
    n *= d;
  return n;
}

std::int64_t
GgufTensorInfo::rows() const {
  return element_count() / dims.at(0);
}

GgufHeader
parse_gguf(std::span<const std::byte> file, const std::string& source) {
  Cursor in(file, source);
  if (in.read<std::uint32_t>("the magic") != kMagic)
    fail(source, "it does not start with the magic bytes 'GGUF'");
  GgufHeader header;
  header.version = in.read<std::uint32_t>("the version");
  if (header.version != 2 && header.version != 3)
    fail(source, fmt::format("version {} (optkit reads versions 2 and 3)", header.version));
  const auto tensor_count = in.read<std::uint64_t>("the tensor count");
  const auto kv_count = in.read<std::uint64_t>("the metadata count");
  // A key takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8.
  if (kv_count > in.remaining() / 13 || tensor_count > in.remaining() / 32)
    fail(source, fmt::format("{} keys and {} tensors cannot fit in its {} bytes (truncated?)", kv_count, tensor_count,
                             file.size()));
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    auto key = in.read_string("a metadata key");
    if (key.empty())
      fail(source, "an empty metadata key");
    auto value = read_value(in, source, key);
    if (!header.metadata.emplace(key, std::move(value)).second)
      fail(source, fmt::format("key '{}' appears twice", key));
  }
  if (const auto it = header.metadata.find("general.alignment"); it != header.metadata.end()) {
    const auto& a = it->second;
    if (a.type != GgufValueType::u32 || a.value.get<std::uint32_t>() == 0 ||
        (a.value.get<std::uint32_t>() & (a.value.get<std::uint32_t>() - 1)) != 0)
      fail(source, "general.alignment is not a u32 power of two");
    header.alignment = a.value.get<std::uint32_t>();
  }
  std::set<std::string> names;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    header.tensors.push_back(read_tensor_info(in, source));
    if (!names.insert(header.tensors.back().name).second)
      fail(source, fmt::format("tensor '{}' appears twice", header.tensors.back().name));
  }
  header.data_offset = align_up(in.position(), header.alignment);
  if (header.data_offset > file.size() && !header.tensors.empty())
    fail(source, "the file ends before its data section (truncated?)");
  check_tensor_layout(header, file.size() - std::min<std::uint64_t>(header.data_offset, file.size()), source);
  return header;
}

bool
is_gguf_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint32_t magic = 0;
  in.read(reinterpret_cast<char*>(&magic), sizeof magic);
  return in && magic == kMagic;
}

GgufFile::GgufFile(const std::filesystem::path& path, LoadMode mode) : m_path(path), m_file(path, mode) {
  m_header = parse_gguf(m_file.bytes(), path.string());
  for (std::size_t i = 0; i < m_header.tensors.size(); ++i)
    m_index.emplace(m_header.tensors[i].name, i);
}

const GgufValue*
GgufFile::find(const std::string& key) const {
  const auto it = m_header.metadata.find(key);
  return it == m_header.metadata.end() ? nullptr : &it->second;
}

namespace {

const GgufValue&
required(const GgufFile& file, const std::string& key, std::initializer_list<GgufValueType> types,
         const char* expected) {
  const auto* v = file.find(key);
  if (!v)
    throw InputError(fmt::format("{}: GGUF metadata has no '{}'", file.path().string(), key));
  if (std::find(types.begin(), types.end(), v->type) == types.end())
    throw InputError(fmt::format("{}: GGUF key '{}' is not {}", file.path().string(), key, expected));
  return *v;
}

} // namespace

std::uint32_t
GgufFile::require_u32(const std::string& key) const {
  const auto& v = required(*this, key, {GgufValueType::u32, GgufValueType::i32, GgufValueType::u64}, "an integer");
  if (v.value.is_number_integer() && v.value.get<std::int64_t>() >= 0 &&
      v.value.get<std::int64_t>() <= std::int64_t{0xffffffff})
    return v.value.get<std::uint32_t>();
  throw InputError(fmt::format("{}: GGUF key '{}' is {}, out of range", m_path.string(), key, v.value.dump()));
}

float
GgufFile::require_f32(const std::string& key) const {
  return required(*this, key, {GgufValueType::f32, GgufValueType::f64}, "a float").value.get<float>();
}

std::string
GgufFile::require_string(const std::string& key) const {
  return required(*this, key, {GgufValueType::string}, "a string").value.get<std::string>();
}

const GgufTensorInfo*
GgufFile::find_tensor(const std::string& name) const {
  const auto it = m_index.find(name);
  return it == m_index.end() ? nullptr : &m_header.tensors[it->second];
}

std::span<const std::byte>
GgufFile::tensor_bytes(const GgufTensorInfo& tensor) const {
  return m_file.bytes().subspan(m_header.data_offset + tensor.offset, tensor.bytes);
}

GgufWriter::GgufWriter(const std::filesystem::path& path) : m_path(path), m_out(path, std::ios::binary) {
  if (!m_out)
    throw RuntimeFailure(fmt::format("{}: cannot create: {}", path.string(), errno_text(errno)));
}

void
GgufWriter::set(const std::string& key, GgufValue value) {
  if (m_header_written)
    throw std::logic_error("GgufWriter::set after the header");
  if (m_metadata.find(key) == m_metadata.end())
    m_key_order.push_back(key);
  m_metadata[key] = std::move(value);
}

void
GgufWriter::add_tensor(const std::string& name, std::vector<std::int64_t> dims, GgmlType type) {
  if (m_header_written)
    throw std::logic_error("GgufWriter::add_tensor after the header");
  if (name.size() > kMaxNameBytes)
    throw std::logic_error("GgufWriter: tensor name " + name + " is 64 bytes or longer");
  GgufTensorInfo t;
  t.name = name;
  t.dims = std::move(dims);
  t.type = type;
  t.offset = m_data_bytes;
  t.bytes = static_cast<std::uint64_t>(t.element_count() / ggml_block_values(type) * ggml_block_bytes(type));
  m_data_bytes = align_up(m_data_bytes + t.bytes, kGgufDefaultAlignment);
  m_tensors.push_back(std::move(t));
}

void
GgufWriter::write_header() {
  write_le(m_out, kMagic);
  write_le<std::uint32_t>(m_out, 3);
  write_le<std::uint64_t>(m_out, m_tensors.size());
  write_le<std::uint64_t>(m_out, m_key_order.size());
  for (const auto& key : m_key_order) {
    const auto& v = m_metadata.at(key);
    write_string(m_out, key);
    write_le(m_out, static_cast<std::uint32_t>(v.type));
    if (v.type != GgufValueType::array) {
      write_scalar(m_out, v.type, v.value);
      continue;
    }
    write_le(m_out, static_cast<std::uint32_t>(v.element_type));
    write_le<std::uint64_t>(m_out, v.value.size());
    for (const auto& element : v.value)
      write_scalar(m_out, v.element_type, element);
  }
  for (const auto& t : m_tensors) {
    write_string(m_out, t.name);
    write_le<std::uint32_t>(m_out, static_cast<std::uint32_t>(t.dims.size()));
    for (const auto d : t.dims)
      write_le<std::uint64_t>(m_out, static_cast<std::uint64_t>(d));
    write_le(m_out, static_cast<std::uint32_t>(t.type));
    write_le(m_out, t.offset);
  }
  m_written = static_cast<std::uint64_t>(m_out.tellp());
  pad_to_alignment();
  m_header_written = true;
}

void
GgufWriter::pad_to_alignment() {
  static constexpr char zeros[kGgufDefaultAlignment] = {};
  const auto padded = align_up(m_written, kGgufDefaultAlignment);
  write_raw(m_out, zeros, padded - m_written);
  m_written = padded;
}

void
GgufWriter::write(std::span<const std::byte> piece) {
  if (!m_header_written)
    write_header();
  while (!piece.empty()) {
    if (m_current >= m_tensors.size())
      throw std::logic_error("GgufWriter: more bytes than the tensors hold");
    const auto& t = m_tensors[m_current];
    const auto take = std::min<std::uint64_t>(piece.size(), t.bytes - m_current_bytes);
    write_raw(m_out, piece.data(), take);
    m_written += take;
    m_current_bytes += take;
    piece = piece.subspan(take);
    if (m_current_bytes == t.bytes) {
      pad_to_alignment();
      ++m_current;
      m_current_bytes = 0;
    }
  }
}

std::uint64_t
GgufWriter::finish() {
  if (!m_header_written)
    write_header();
  if (m_current != m_tensors.size())
    throw std::logic_error(fmt::format("GgufWriter: tensor {} of {} not written", m_current, m_tensors.size()));
  m_out.flush();
  if (!m_out)
    throw RuntimeFailure(fmt::format("{}: cannot write: {}", m_path.string(), errno_text(errno)));
  m_out.close();
  return m_written;
}

} // namespace optkit::model
