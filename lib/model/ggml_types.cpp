#include "model/ggml_types.hpp"

#include <array>
#include <stdexcept>
#include <string>
#include <utility>

namespace optkit::model {

std::int64_t
ggml_block_values(GgmlType type) {
  switch (type) {
  case GgmlType::f32:
  case GgmlType::f16:
  case GgmlType::bf16:
    return 1;
  case GgmlType::q5_0:
  case GgmlType::q5_1:
  case GgmlType::q8_0:
    return 32;
  case GgmlType::q4_k:
  case GgmlType::q5_k:
  case GgmlType::q6_k:
    return 256;
  }
  throw std::logic_error("ggml_block_values: unknown type");
}

std::int64_t
ggml_block_bytes(GgmlType type) {
  switch (type) {
  case GgmlType::f32:
    return 4;
  case GgmlType::f16:
  case GgmlType::bf16:
    return 2;
  case GgmlType::q5_0:
    return 22;
  case GgmlType::q5_1:
    return 24;
  case GgmlType::q8_0:
    return 34;
  case GgmlType::q4_k:
    return 144;
  case GgmlType::q5_k:
    return 176;
  case GgmlType::q6_k:
    return 210;
  }
  throw std::logic_error("ggml_block_bytes: unknown type");
}

std::int64_t
ggml_row_bytes(GgmlType type, std::int64_t values) {
  return values / ggml_block_values(type) * ggml_block_bytes(type);
}

std::string_view
ggml_type_name(GgmlType type) {
  switch (type) {
  case GgmlType::f32:
    return "F32";
  case GgmlType::f16:
    return "F16";
  case GgmlType::bf16:
    return "BF16";
  case GgmlType::q5_0:
    return "Q5_0";
  case GgmlType::q5_1:
    return "Q5_1";
  case GgmlType::q8_0:
    return "Q8_0";
  case GgmlType::q4_k:
    return "Q4_K";
  case GgmlType::q5_k:
    return "Q5_K";
  case GgmlType::q6_k:
    return "Q6_K";
  }
  return "?";
}

std::optional<GgmlType>
ggml_type_from_id(std::uint32_t id) {
  for (const auto t : {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0,
                       GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k})
    if (static_cast<std::uint32_t>(t) == id)
      return t;
  return std::nullopt;
}

bool
ggml_is_quantized(GgmlType type) {
  return ggml_block_values(type) > 1;
}

namespace {

// general.file_type ids and llama-quantize's names for them (llama_ftype).
constexpr std::array<std::pair<std::uint32_t, const char*>, 16> kFileTypeNames = {{
    {0, "F32"},
    {1, "F16"},
    {2, "Q4_0"},
    {3, "Q4_1"},
    {7, "Q8_0"},
    {8, "Q5_0"},
    {9, "Q5_1"},
    {10, "Q2_K"},
    {11, "Q3_K_S"},
    {12, "Q3_K_M"},
    {13, "Q3_K_L"},
    {14, "Q4_K_S"},
    {15, "Q4_K_M"},
    {16, "Q5_K_S"},
    {17, "Q5_K_M"},
    {18, "Q6_K"},
}};

} // namespace

std::optional<GgufFileType>
parse_gguf_file_type(std::string_view name) {
  for (const auto t : kGgufFileTypes)
    if (gguf_file_type_name(t) == name)
      return t;
  return std::nullopt;
}

std::string_view
gguf_file_type_name(GgufFileType type) {
  for (const auto& [id, name] : kFileTypeNames)
    if (id == static_cast<std::uint32_t>(type))
      return name;
  throw std::logic_error("gguf_file_type_name: unknown file type");
}

std::string
gguf_file_type_name(std::uint32_t id) {
  for (const auto& [known, name] : kFileTypeNames)
    if (known == id)
      return name;
  return id == 32 ? "BF16" : "file type " + std::to_string(id);
}

} // namespace optkit::model
