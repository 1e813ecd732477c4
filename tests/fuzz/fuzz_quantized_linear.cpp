// libFuzzer target: a compressed-tensors checkpoint's quantization_config and one linear's tensors,
// in any scheme the runtime reads (int8, packed integers with or without zero points, FP8 per
// channel, tensor or block, NVFP4, MXFP4), must load into a weight whose rows and products are
// computed, or throw InputError, never crash, for any bytes. Input: the quantization_config JSON,
// a NUL byte, then the safetensors file holding the linear "m" (m.weight, m.weight_packed,
// m.weight_scale, m.weight_zero_point, m.weight_global_scale, ...).
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/weight_store.hpp"
#include "quant/compressed_tensors.hpp"
#include "runtime/weight_loader.hpp"

#include "../support/scratch_dir.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

const std::filesystem::path&
scratch() {
  static const optkit::test::ScratchDir dir; // removed when the fuzzer exits
  return dir.path();
}

void
write(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// [rows, cols] the tensors imply: the plain weight's shape, or the packed one's rows with
// weight_shape's columns (integers) or two per byte (FP4).
std::pair<std::int64_t, std::int64_t>
linear_shape(const optkit::model::WeightStore& store) {
  if (const auto plain = store.find("m.weight"); plain.info && plain.shape().size() == 2)
    return {plain.shape()[0], plain.shape()[1]};
  const auto packed = store.find("m.weight_packed");
  if (!packed.info || packed.shape().size() != 2)
    return {0, 0};
  if (const auto shape = store.find("m.weight_shape"); shape.info && shape.element_count() == 2)
    return {packed.shape()[0], static_cast<std::int64_t>(shape.at(1))};
  return {packed.shape()[0], packed.shape()[1] * 2};
}

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto split = input.find('\0');
  if (split == std::string_view::npos)
    return 0;
  const auto json = nlohmann::json::parse(input.substr(0, split), nullptr, false);
  if (json.is_discarded())
    return 0;
  write(scratch() / "model.safetensors", input.substr(split + 1));
  try {
    const auto config = optkit::quant::read_quantization_config({{"quantization_config", json}}, "fuzz/config.json");
    if (!config)
      return 0;
    const optkit::model::WeightStore store(scratch());
    const auto [rows, cols] = linear_shape(store);
    if (rows <= 0 || cols <= 0 || rows > 4096 || cols > 4096)
      return 0;
    const auto weight = optkit::runtime::load_linear(store, "m", rows, cols, &*config);
    std::vector<float> row(static_cast<std::size_t>(cols)), x(static_cast<std::size_t>(cols), 1.0f),
        y(static_cast<std::size_t>(rows));
    weight->row(rows - 1, row.data());
    optkit::ThreadPool pool(1);
    weight->multiply(x.data(), 1, y.data(), pool);
  } catch (const optkit::InputError&) {
  }
  return 0;
}
