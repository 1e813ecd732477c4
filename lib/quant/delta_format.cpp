#include "quant/delta_format.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_fields.hpp"
#include "core/sha256.hpp"
#include "quant/packing.hpp"
#include "quant/quant_args.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unistd.h>
#include <zstd.h>

namespace optkit::quant {

namespace {

constexpr const char* kPlainFile = kDeltaPlainFile;
constexpr const char* kZstdFile = kDeltaZstdFile;
constexpr int kZstdLevel = 19;
constexpr std::uint64_t kMaxDecompressedBytes = 1ULL << 40;

void
check_config(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object() || config.value("format", "") != kDeltaFormat || config.value("version", 0) != 1 ||
      !config.contains("bits") || !config.at("bits").is_number_integer() || !config.contains("base") ||
      !config.at("base").is_object())
    throw InputError(
        fmt::format("{}: not an {} v1 artifact (format, version, bits and base are required)", source, kDeltaFormat));
  if (config.contains("levels") &&
      (!config.at("levels").is_string() || !parse_levels(config.at("levels").get<std::string>())))
    throw InputError(fmt::format("{}: levels must be \"midtread\" or \"midrise\"", source));
}

} // namespace

std::vector<std::byte>
zstd_decompress(std::string_view compressed, const std::string& source, std::uint64_t max_bytes) {
  const auto size = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
    throw InputError(fmt::format("{}: not a zstd frame with a known size (the file is damaged)", source));
  if (size > max_bytes)
    throw InputError(
        fmt::format("{}: the zstd frame claims {} bytes, more than the {} allowed", source, size, max_bytes));
  std::vector<std::byte> out(static_cast<std::size_t>(size));
  const auto got = ZSTD_decompress(out.data(), out.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(got) || got != out.size())
    throw InputError(fmt::format("{}: zstd: {}", source, ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame"));
  return out;
}

Sparse24Encoding
encode_sparse_2_4(std::span<const float> q, std::span<const std::uint8_t> kept_mask, std::int64_t rows,
                  std::int64_t cols, int bits) {
  if (cols % 8 != 0)
    throw InputError(fmt::format("2:4 delta encoding needs in_features divisible by 8, not {}", cols));
  if (q.size() != static_cast<std::size_t>(rows * cols) || kept_mask.size() != q.size())
    throw InputError(fmt::format("2:4 delta encoding: values or mask do not fit [{}, {}]", rows, cols));
  const std::int64_t kept_cols = cols / 2;
  std::vector<std::int8_t> kept(static_cast<std::size_t>(rows * kept_cols));
  Sparse24Encoding out;
  out.indices.assign(static_cast<std::size_t>(rows * cols / 8), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < cols / 4; ++g) {
      const auto first = static_cast<std::size_t>(r * cols + g * 4);
      int positions[2] = {0, 0};
      float values[2] = {0.0f, 0.0f};
      int found = 0;
      for (int k = 0; k < 4; ++k)
        if (kept_mask[first + static_cast<std::size_t>(k)] != 0) {
          if (found < 2) {
            values[found] = q[first + static_cast<std::size_t>(k)];
            positions[found] = k;
          }
          ++found;
        }
      if (found != 2)
        throw InputError(
            fmt::format("row {} columns {}-{} do not keep exactly 2 values (not 2:4)", r, g * 4, g * 4 + 3));
      const auto nibble = static_cast<std::uint8_t>(positions[0] | (positions[1] << 2));
      auto& byte = out.indices[static_cast<std::size_t>(r * cols / 8 + g / 2)];
      byte = static_cast<std::uint8_t>(byte | (g % 2 == 0 ? nibble : nibble << 4));
      for (int k = 0; k < 2; ++k)
        kept[static_cast<std::size_t>(r * kept_cols + g * 2 + k)] = static_cast<std::int8_t>(values[k]);
    }
  out.values = pack_rows(kept, rows, kept_cols, bits);
  return out;
}

void
decode_sparse_2_4_row(const std::int32_t* values, const std::uint8_t* indices, std::int64_t cols, int bits,
                      float offset, float* out) {
  std::fill(out, out + cols, 0.0f);
  for (std::int64_t g = 0; g < cols / 4; ++g) {
    const auto byte = indices[g / 2];
    const int nibble = g % 2 == 0 ? (byte & 0x0f) : (byte >> 4);
    out[g * 4 + (nibble & 3)] = static_cast<float>(unpack_value(values, g * 2, bits)) + offset;
    out[g * 4 + ((nibble >> 2) & 3)] = static_cast<float>(unpack_value(values, g * 2 + 1, bits)) + offset;
  }
}

nlohmann::json
read_delta_config(const std::filesystem::path& directory) {
  if (!std::filesystem::is_directory(directory))
    throw InputError(fmt::format("{}: not a directory (expected an optkit compress delta output)", directory.string()));
  auto config = read_json_file(directory / "delta_config.json", "an optkit delta artifact");
  const auto source = (directory / "delta_config.json").string();
  read_json_fields(source, [&] { check_config(config, source); });
  return config;
}

DeltaArtifact::DeltaArtifact(const std::filesystem::path& directory)
    : m_dir(directory), m_config(read_delta_config(directory)) {
  const auto zst = directory / kZstdFile, plain = directory / kPlainFile;
  if (std::filesystem::is_regular_file(zst)) {
    m_bytes = zstd_decompress(read_input_file(zst, "delta tensors"), zst.string(), kMaxDecompressedBytes);
  } else {
    const auto text = read_input_file(plain, "delta tensors");
    m_bytes.resize(text.size());
    std::memcpy(m_bytes.data(), text.data(), text.size());
  }
  m_header = model::parse_safetensors(m_bytes, (directory / kPlainFile).string());
  for (const auto& t : m_header.tensors)
    m_index.emplace(t.name, &t);
}

DeltaArtifact::DeltaArtifact(nlohmann::json config, std::vector<std::byte> tensors, const std::string& source)
    : m_dir(source), m_config(std::move(config)), m_bytes(std::move(tensors)) {
  check_config(m_config, source);
  m_header = model::parse_safetensors(m_bytes, source);
  for (const auto& t : m_header.tensors)
    m_index.emplace(t.name, &t);
}

DeltaArtifact::~DeltaArtifact() = default;

model::TensorView
DeltaArtifact::find(const std::string& name) const {
  const auto it = m_index.find(name);
  if (it == m_index.end())
    return {};
  const auto& t = *it->second;
  return {&t, std::span(m_bytes).subspan(static_cast<std::size_t>(m_header.data_offset + t.begin),
                                         static_cast<std::size_t>(t.end - t.begin))};
}

bool
DeltaArtifact::has_delta(const std::string& module) const {
  return find(module + ".delta_values").info != nullptr || find(module + ".delta_packed").info != nullptr;
}

DeltaArtifact::StoredDelta
DeltaArtifact::stored_delta(const std::string& module, std::int64_t rows, std::int64_t cols) const {
  const auto dense = find(module + ".delta_packed");
  const auto values = dense.info ? dense : find(module + ".delta_values");
  const auto indices = find(module + ".delta_indices");
  const auto scale = find(module + ".delta_scale");
  if (!values.info || (!dense.info && !indices.info) || !scale.info)
    throw InputError(
        fmt::format("{}: {} lacks delta_values/delta_packed, delta_indices or delta_scale", m_dir.string(), module));
  StoredDelta d;
  d.bits = m_config.value("bits", 0);
  if (d.bits < 2 || d.bits > 8 || 32 % d.bits != 0)
    throw InputError(fmt::format("{}: bits {} in delta_config.json (expected 2, 4 or 8)", m_dir.string(), d.bits));
  d.sparse = !dense.info;
  d.words = packed_words(dense.info ? cols : cols / 2, d.bits);
  const bool indices_fit = dense.info || (cols % 8 == 0 && indices.dtype() == model::DType::u8 &&
                                          indices.shape() == std::vector<std::int64_t>{rows, cols / 8});
  if (!indices_fit || values.dtype() != model::DType::i32 ||
      values.shape() != std::vector<std::int64_t>{rows, d.words} || scale.shape().size() != 2 ||
      scale.shape()[0] != rows || scale.shape()[1] < 1 || scale.shape()[1] > cols)
    throw InputError(
        fmt::format("{}: the delta tensors of {} do not fit a [{}, {}] matrix", m_dir.string(), module, rows, cols));
  d.offset = parse_levels(m_config.value("levels", "midtread")) == Levels::midrise ? 0.5f : 0.0f;
  d.groups = scale.shape()[1];
  d.group_size = (cols + d.groups - 1) / d.groups;
  d.values = reinterpret_cast<const std::int32_t*>(values.bytes.data());
  d.indices = dense.info ? nullptr : reinterpret_cast<const std::uint8_t*>(indices.bytes.data());
  d.scale = scale;
  return d;
}

std::vector<float>
DeltaArtifact::decode_delta(const std::string& module, std::int64_t rows, std::int64_t cols) const {
  const StoredDelta d = stored_delta(module, rows, cols);
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = out.data() + r * cols;
    if (d.sparse)
      decode_sparse_2_4_row(d.values + r * d.words, d.indices + r * cols / 8, cols, d.bits, d.offset, row);
    else
      for (std::int64_t c = 0; c < cols; ++c)
        row[c] = static_cast<float>(unpack_value(d.values + r * d.words, c, d.bits)) + d.offset;
    for (std::int64_t c = 0; c < cols; ++c)
      row[c] *= d.scale.at(static_cast<std::size_t>(r * d.groups + c / d.group_size));
  }
  return out;
}

void
zstd_compress_delta_tensors(const std::filesystem::path& directory) {
  const auto plain = directory / kPlainFile, zst = directory / kZstdFile;
  auto temporary = zst;
  temporary += fmt::format(".tmp-{}", ::getpid());
  const std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> context(ZSTD_createCCtx(), ZSTD_freeCCtx);
  const std::unique_ptr<std::FILE, decltype(&std::fclose)> in(std::fopen(plain.c_str(), "rb"), std::fclose);
  std::unique_ptr<std::FILE, decltype(&std::fclose)> out(std::fopen(temporary.c_str(), "wb"), std::fclose);
  if (!context || !in || !out)
    throw RuntimeFailure(
        fmt::format("{}: cannot compress into {}: {}", plain.string(), temporary.string(), errno_text(errno)));
  const auto size = std::filesystem::file_size(plain);
  ZSTD_CCtx_setParameter(context.get(), ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setPledgedSrcSize(context.get(), size); // the frame records it, as the reader needs
  std::vector<char> input(ZSTD_CStreamInSize()), output(ZSTD_CStreamOutSize());
  bool ok = true;
  for (std::uint64_t read = 0; ok;) {
    const auto got = std::fread(input.data(), 1, input.size(), in.get());
    read += got;
    const bool last = read >= size || got == 0;
    ZSTD_inBuffer from{input.data(), got, 0};
    for (bool done = false; ok && !done;) {
      ZSTD_outBuffer to{output.data(), output.size(), 0};
      const auto left = ZSTD_compressStream2(context.get(), &to, &from, last ? ZSTD_e_end : ZSTD_e_continue);
      if (ZSTD_isError(left)) {
        out.reset();
        std::filesystem::remove(temporary);
        throw RuntimeFailure(fmt::format("{}: zstd: {}", plain.string(), ZSTD_getErrorName(left)));
      }
      ok = std::fwrite(output.data(), 1, to.pos, out.get()) == to.pos;
      done = last ? left == 0 : from.pos == from.size;
    }
    if (last)
      break;
  }
  ok = ok && std::fflush(out.get()) == 0 && ::fsync(::fileno(out.get())) == 0;
  const int err = errno;
  ok = std::fclose(out.release()) == 0 && ok;
  if (!ok) {
    std::filesystem::remove(temporary);
    throw RuntimeFailure(fmt::format("{}: write failed: {}", zst.string(), errno_text(err)));
  }
  std::filesystem::rename(temporary, zst);
  std::filesystem::remove(plain);
}

namespace {

// A weights file's SHA-256, read once per process for each identity (path, size, modification
// time): serving many deltas of one base, or reloading an evicted one, checks the base's
// gigabytes against each delta without reading them again.
std::string
weights_file_sha256(const std::filesystem::path& file) {
  using Identity = std::tuple<std::string, std::uintmax_t, std::filesystem::file_time_type::rep>;
  static std::mutex mutex;
  static std::map<Identity, std::string> known;
  const Identity identity{std::filesystem::canonical(file).string(), std::filesystem::file_size(file),
                          std::filesystem::last_write_time(file).time_since_epoch().count()};
  {
    const std::lock_guard lock(mutex);
    if (const auto it = known.find(identity); it != known.end())
      return it->second;
  }
  auto digest = digest_file(file).sha256;
  const std::lock_guard lock(mutex);
  known[identity] = digest;
  return digest;
}

} // namespace

std::string
weights_sha256(const std::filesystem::path& model_dir) {
  std::vector<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir))
    if (entry.path().extension() == ".safetensors")
      entries.push_back(entry.path().filename().string() + ":" + weights_file_sha256(entry.path()));
  std::sort(entries.begin(), entries.end());
  std::string joined;
  for (const auto& e : entries)
    joined += e + "\n";
  return sha256_hex(joined);
}

} // namespace optkit::quant
