#include "runtime/weight_loader.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/gguf_model.hpp"
#include "quant/packing.hpp"
#include "runtime/ggml_weight.hpp"
#include "runtime/quantized_weight.hpp"

#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace optkit::runtime {

namespace {

void
check_shape(const model::TensorView& view, const std::vector<std::int64_t>& expected) {
  if (view.shape() != expected)
    throw InputError(fmt::format("tensor '{}' has shape [{}] but the config implies [{}]", view.info->name,
                                 fmt::join(view.shape(), ", "), fmt::join(expected, ", ")));
}

// The rows `slice` takes of a [stored_rows, …] tensor's bytes, `row_bytes` each.
std::span<const std::byte>
sliced_rows(std::span<const std::byte> bytes, std::size_t row_bytes, RowSlice slice, std::int64_t rows) {
  return bytes.subspan(static_cast<std::size_t>(slice.first) * row_bytes, static_cast<std::size_t>(rows) * row_bytes);
}

// A [1] F32 tensor's value (NVFP4's global scales).
float
scalar_tensor(const model::WeightStore& store, const std::string& name) {
  const auto view = store.require(name);
  if (view.element_count() != 1 || view.dtype() != model::DType::f32 || !(view.at(0) > 0.0f))
    throw InputError(fmt::format("tensor '{}' must be one positive F32 value", name));
  return view.at(0);
}

// nvfp4- or mxfp4-pack-quantized: weight_packed U8 [rows, cols/2], weight_scale [rows, cols/group]
// as FP8 E4M3 (NVFP4, with weight_global_scale and, with FP4 activations, input_global_scale) or
// U8 E8M0 exponents (MXFP4).
std::unique_ptr<LinearWeight>
load_fp4_linear(const model::WeightStore& store, const std::string& prefix, std::int64_t rows, std::int64_t cols,
                const quant::ConfigGroup& q, RowSlice slice) {
  const auto& w = q.weights;
  if (cols % w.group_size != 0)
    throw InputError(
        fmt::format("'{}': {} input columns are not a whole number of FP4 groups of {}", prefix, cols, w.group_size));
  const auto packed = store.require(prefix + ".weight_packed");
  const auto scale = store.require(prefix + ".weight_scale");
  const bool mx = w.has_power_of_two_scales();
  if (packed.dtype() != model::DType::u8)
    throw InputError(fmt::format("tensor '{}' must be U8 (two FP4 values per byte)", packed.info->name));
  check_shape(packed, {slice.stored_rows, cols / 2});
  if (scale.dtype() != (mx ? model::DType::u8 : model::DType::f8_e4m3))
    throw InputError(fmt::format("tensor '{}' must be {}", scale.info->name, mx ? "U8 (E8M0 exponents)" : "F8_E4M3"));
  const auto groups = cols / w.group_size;
  check_shape(scale, {slice.stored_rows, groups});
  QuantizedWeightSpec spec;
  spec.storage = QuantizedStorage::fp4_packed;
  spec.rows = rows;
  spec.cols = cols;
  spec.bits = 4;
  spec.group_size = w.group_size;
  spec.values = sliced_rows(packed.bytes, static_cast<std::size_t>(cols / 2), slice, rows);
  spec.scale_codes = sliced_rows(scale.bytes, static_cast<std::size_t>(groups), slice, rows);
  spec.fp4_scales = mx ? Fp4Scales::e8m0 : Fp4Scales::fp8_under_global;
  if (!mx)
    spec.global_scale = scalar_tensor(store, prefix + ".weight_global_scale");
  spec.input_activations = q.input_activations;
  if (q.input_activations && q.input_activations->has_global_scale())
    spec.input_global_scale = scalar_tensor(store, prefix + ".input_global_scale");
  return make_quantized_weight(std::move(spec));
}

// An asymmetric pack-quantized weight's zero points: weight_zero_point I32 [⌈stored rows·bits/32⌉,
// groups], packed down the columns; the slice's rows, as floats.
std::vector<float>
zero_points(const model::WeightStore& store, const std::string& prefix, int bits, RowSlice slice, std::int64_t rows,
            std::int64_t groups) {
  const auto view = store.require(prefix + ".weight_zero_point");
  if (view.dtype() != model::DType::i32)
    throw InputError(fmt::format("tensor '{}' must be I32", view.info->name));
  check_shape(view, {quant::packed_words(slice.stored_rows, bits), groups});
  std::vector<std::int32_t> words(static_cast<std::size_t>(view.element_count()));
  std::memcpy(words.data(), view.bytes.data(), words.size() * sizeof(std::int32_t));
  const auto zeros = quant::unpack_columns(words, slice.stored_rows, groups, bits);
  return {zeros.begin() + slice.first * groups, zeros.begin() + (slice.first + rows) * groups};
}

// A block grid's [⌈rows/block_rows⌉, ⌈cols/block_cols⌉] scales spread to one per row and block column.
std::vector<float>
block_scales_per_row(const std::vector<float>& tiles, const quant::QuantArgs& w, RowSlice slice, std::int64_t rows,
                     std::int64_t cols) {
  const auto tile_cols = (cols + w.block_cols - 1) / w.block_cols;
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(rows * tile_cols));
  for (std::int64_t r = slice.first; r < slice.first + rows; ++r) {
    const auto first = tiles.begin() + (r / w.block_rows) * tile_cols;
    out.insert(out.end(), first, first + tile_cols);
  }
  return out;
}

std::unique_ptr<LinearWeight>
load_quantized_linear(const model::WeightStore& store, const std::string& prefix, std::int64_t rows, std::int64_t cols,
                      const quant::ConfigGroup& q, RowSlice slice) {
  if (q.weights.is_fp4())
    return load_fp4_linear(store, prefix, rows, cols, q, slice);
  const auto packed = store.find(prefix + ".weight_packed");
  const auto plain = store.find(prefix + ".weight");
  const auto scale = store.require(prefix + ".weight_scale");
  const std::int64_t stored_rows = slice.stored_rows;
  QuantizedWeightSpec spec;
  spec.rows = rows;
  spec.cols = cols;
  spec.bits = q.weights.bits;
  spec.input_activations = q.input_activations;
  if (packed.info) {
    if (packed.dtype() != model::DType::i32)
      throw InputError(fmt::format("tensor '{}' must be I32", packed.info->name));
    const auto words = quant::packed_words(cols, q.weights.bits);
    check_shape(packed, {stored_rows, words});
    const auto shape = store.require(prefix + ".weight_shape");
    if (shape.element_count() != 2 || shape.at(0) != static_cast<float>(stored_rows) ||
        shape.at(1) != static_cast<float>(cols))
      throw InputError(fmt::format("tensor '{}' does not say [{}, {}]", shape.info->name, stored_rows, cols));
    spec.storage = QuantizedStorage::packed_int32;
    spec.values = sliced_rows(packed.bytes, static_cast<std::size_t>(words) * 4, slice, rows);
  } else if (plain.info && (plain.dtype() == model::DType::i8 || plain.dtype() == model::DType::f8_e4m3)) {
    check_shape(plain, {stored_rows, cols});
    spec.storage = plain.dtype() == model::DType::i8 ? QuantizedStorage::int8_values : QuantizedStorage::fp8_values;
    spec.values = sliced_rows(plain.bytes, static_cast<std::size_t>(cols), slice, rows);
  } else {
    throw InputError(fmt::format("'{}' has a weight_scale but no weight_packed or I8/F8_E4M3 weight", prefix));
  }
  auto scales = scale.to_floats();
  const auto& shape = scale.shape();
  std::int64_t groups = 1;
  if (q.weights.strategy == quant::Strategy::block) {
    const auto& w = q.weights;
    if (shape != std::vector<std::int64_t>{(stored_rows + w.block_rows - 1) / w.block_rows,
                                           (cols + w.block_cols - 1) / w.block_cols})
      throw InputError(fmt::format("tensor '{}' has shape [{}], which is not one scale per {}x{} block of [{}, {}]",
                                   scale.info->name, fmt::join(shape, ", "), w.block_rows, w.block_cols, stored_rows,
                                   cols));
    spec.group_size = w.block_cols;
    spec.scales = block_scales_per_row(scales, w, slice, rows, cols);
    return make_quantized_weight(std::move(spec));
  }
  if (shape.size() == 1 && shape[0] == 1) { // per tensor
    scales.assign(static_cast<std::size_t>(stored_rows), scales.front());
    spec.group_size = cols;
  } else if (shape.size() == 2 && shape[0] == stored_rows && shape[1] == 1) {
    spec.group_size = cols;
  } else if (shape.size() == 2 && shape[0] == stored_rows && q.weights.group_size > 0 &&
             shape[1] == (cols + q.weights.group_size - 1) / q.weights.group_size) {
    spec.group_size = q.weights.group_size;
    groups = shape[1];
  } else {
    throw InputError(fmt::format("tensor '{}' has shape [{}], which fits neither a channel nor a group-{} scale of "
                                 "[{}, {}]",
                                 scale.info->name, fmt::join(shape, ", "), q.weights.group_size, stored_rows, cols));
  }
  spec.scales.assign(scales.begin() + slice.first * groups, scales.begin() + (slice.first + rows) * groups);
  if (!q.weights.symmetric)
    spec.zeros = zero_points(store, prefix, q.weights.bits, slice, rows, groups);
  return make_quantized_weight(std::move(spec));
}

// `weight`, after letting the store's pages of `tensor` leave memory if it no longer reads them
// (a BF16 weight packed into panels at load). Another slice of the same tensor read later reads
// the file's bytes again.
std::unique_ptr<LinearWeight>
released_if_copied(const model::WeightStore& store, const std::string& tensor, std::unique_ptr<LinearWeight> weight) {
  if (!weight->reads_source())
    store.release(tensor);
  return weight;
}

// A GGUF matrix as llama.cpp's CPU backend multiplies it: an F32 or BF16 one in HF row order is the
// dense weight over its bytes (BF16 with bf16 activations, as llama.cpp rounds them); the others
// are dequantized as used, their inputs rounded for their type (runtime/ggml_weight.hpp).
std::unique_ptr<LinearWeight>
load_gguf_linear(const model::WeightStore& store, const std::string& prefix, std::int64_t rows, std::int64_t cols,
                 WeightLayout layout) {
  const auto matrix = store.gguf_matrix(prefix + ".weight");
  if (!matrix)
    throw InputError(fmt::format("{}: tensor '{}' is missing from the GGUF file", store.files().front().string(),
                                 prefix + ".weight"));
  if (matrix->rows != rows || matrix->cols != cols)
    throw InputError(fmt::format("tensor '{}' is [{}, {}] but the config implies [{}, {}]", prefix + ".weight",
                                 matrix->rows, matrix->cols, rows, cols));
  if (const auto view = store.find(prefix + ".weight"); view.info && view.dtype() != model::DType::f16)
    return released_if_copied(
        store, prefix + ".weight",
        make_dense_weight(view.dtype(), view.bytes, rows, cols,
                          view.dtype() == model::DType::bf16 ? ActivationPrecision::bf16 : ActivationPrecision::fp32,
                          layout));
  return make_ggml_weight(*matrix);
}

} // namespace

std::optional<quant::QuantizationConfig>
load_quantization_config(const std::filesystem::path& model_dir) {
  if (model::is_gguf_model(model_dir))
    return std::nullopt; // its tensors say how each is stored
  const auto path = model_dir / "config.json";
  return quant::read_quantization_config(read_json_file(path), path.string());
}

std::unique_ptr<LinearWeight>
load_linear(const model::WeightStore& store, const std::string& prefix, std::int64_t rows, std::int64_t cols,
            const quant::QuantizationConfig* quantization, ActivationPrecision activations, RowSlice slice,
            WeightLayout layout) {
  if (slice.stored_rows == 0)
    slice.stored_rows = rows;
  if (store.is_gguf())
    return load_gguf_linear(store, prefix, rows, cols, layout);
  if (const auto* group = quantization ? quantization->group_for(prefix) : nullptr;
      group && store.find(prefix + ".weight_scale").info)
    return load_quantized_linear(store, prefix, rows, cols, *group, slice);
  const auto view = store.require(prefix + ".weight");
  check_shape(view, {slice.stored_rows, cols});
  switch (view.dtype()) {
  case model::DType::f32:
  case model::DType::bf16:
  case model::DType::f16:
    return released_if_copied(
        store, view.info->name,
        make_dense_weight(
            view.dtype(),
            sliced_rows(view.bytes, model::dtype_size(view.dtype()) * static_cast<std::size_t>(cols), slice, rows),
            rows, cols, activations, layout));
  default:
    throw InputError(fmt::format("tensor '{}' is {}, which the runtime cannot use as a dense weight (expected F32, "
                                 "BF16 or F16)",
                                 view.info->name, model::dtype_name(view.dtype())));
  }
}

void
check_delta_base(const quant::DeltaArtifact& delta, const std::filesystem::path& base_dir) {
  const auto expected = delta.config().at("base").value("weights_sha256", "");
  if (expected != quant::weights_sha256(base_dir))
    throw InputError(fmt::format("delta {} was compressed against a different base than {} (weights SHA-256 "
                                 "differs); use the base it names in delta_config.json",
                                 delta.directory().string(), base_dir.string()));
}

std::unique_ptr<LinearWeight>
merge_delta(std::unique_ptr<LinearWeight> base, const quant::DeltaArtifact& delta, const std::string& module) {
  const auto rows = base->rows(), cols = base->cols();
  if (const auto own = delta.find(module + ".weight"); own.info) { // the variant's tensor, stored whole
    check_shape(own, {rows, cols});
    return make_owned_dense_weight(own.to_floats(), rows, cols);
  }
  if (!delta.has_delta(module))
    return base;
  auto merged = delta.decode_delta(module, rows, cols);
  std::vector<float> row(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    base->row(r, row.data());
    for (std::int64_t c = 0; c < cols; ++c)
      merged[static_cast<std::size_t>(r * cols + c)] += row[static_cast<std::size_t>(c)];
  }
  return make_owned_dense_weight(std::move(merged), rows, cols);
}

std::vector<float>
load_vector(const model::WeightStore& store, const quant::DeltaArtifact* delta, const std::string& name,
            std::int64_t size) {
  const auto view = delta ? delta->find(name) : model::TensorView{};
  if (!view.info)
    return load_vector(store, name, size);
  check_shape(view, {size});
  return view.to_floats();
}

std::vector<float>
load_vector(const model::WeightStore& store, const std::string& name, std::int64_t size) {
  const auto view = store.require(name);
  check_shape(view, {size});
  std::vector<float> out(static_cast<std::size_t>(size));
  for (std::int64_t i = 0; i < size; ++i)
    out[static_cast<std::size_t>(i)] = view.at(static_cast<std::size_t>(i));
  return out;
}

} // namespace optkit::runtime
