// Builds the runtime's weights from a model folder's tensors, checking every shape against the
// config. The single place that decides which LinearWeight implementation a tensor gets.
#pragma once

#include "model/weight_store.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/delta_format.hpp"
#include "runtime/linear_weight.hpp"

#include <filesystem>
#include <optional>

#include <memory>
#include <string>
#include <vector>

namespace optkit::runtime {

// The compressed-tensors quantization_config of a model folder's config.json, if any.
std::optional<quant::QuantizationConfig> load_quantization_config(const std::filesystem::path& model_dir);

// Rows [first, first + rows) of a module stored fused with others (Phi-3's qkv_proj), of
// stored_rows in all; stored_rows 0: the module is stored alone.
struct RowSlice {
  std::int64_t first = 0;
  std::int64_t stored_rows = 0;
};

// The [rows, cols] linear layer `prefix` (an HF module path): `<prefix>.weight` in F32/BF16/F16,
// or, when a config group of `quantization` quantizes the module, its compressed-tensors tensors (weight_packed +
// weight_scale + weight_shape, or an I8 / F8_E4M3 weight + weight_scale); of a fused module, the
// rows `slice` names (zero copy where the tensor is mapped).
// `activations`: how a BF16 weight multiplies its activations (runtime/activation_precision.hpp);
// `layout`: where a dense BF16 one lives (linear_weight.hpp).
std::unique_ptr<LinearWeight> load_linear(const model::WeightStore& store, const std::string& prefix, std::int64_t rows,
                                          std::int64_t cols, const quant::QuantizationConfig* quantization = nullptr,
                                          ActivationPrecision activations = ActivationPrecision::fp32,
                                          RowSlice slice = {}, WeightLayout layout = WeightLayout::fastest);
// Throws InputError unless `delta` was compressed against the weights in `base_dir`.
void check_delta_base(const quant::DeltaArtifact& delta, const std::filesystem::path& base_dir);
// The variant's own `module` when the artifact stores it whole, W_base + Δ when it holds a
// compressed delta for it (merged once, kept in fp32), else `base` itself.
std::unique_ptr<LinearWeight> merge_delta(std::unique_ptr<LinearWeight> base, const quant::DeltaArtifact& delta,
                                          const std::string& module);

// A 1-D tensor of `size` values (norm weights, biases) widened to fp32.
std::vector<float> load_vector(const model::WeightStore& store, const std::string& name, std::int64_t size);
// The same from the delta artifact when it carries the tensor (the variant's norms), else from `store`.
std::vector<float> load_vector(const model::WeightStore& store, const quant::DeltaArtifact* delta,
                               const std::string& name, std::int64_t size);

} // namespace optkit::runtime
