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

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path, LoadMode mode) : m_path(path), m_file(path, mode) {
  m_header = parse_safetensors(m_file.bytes(), path.string());
  for (std::size_t i = 0; i < m_header.tensors.size(); ++i)
    m_index.emplace(m_header.tensors[i].name, i);
}

TensorView
SafetensorsFile::find(const std::string& name) const {
  const auto it = m_index.find(name);
  if (it == m_index.end())
    return {};
  const auto& info = m_header.tensors[it->second];
  return {&info,
          m_file.bytes().subspan(m_header.data_offset + info.begin, static_cast<std::size_t>(info.end - info.begin))};
}

void
SafetensorsFile::release(std::span<const std::byte> bytes) const {
  m_file.release(bytes);
}

} // namespace optkit::model
