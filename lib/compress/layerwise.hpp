// Layer-wise sequential compression (OptiKit Algorithm 2's inner step; DeltaZip Algorithm 1).
// Calibration samples are embedded once; then for each decoder layer in order: one pass through
// the layer collects every linear input's Hessian (and per-channel activation maxima and means),
// SmoothQuant or AWQ (compress/awq_smoothing.hpp) folds its factors into the norm weights (AWQ
// also into v_proj's and up_proj's rows) and the layers reading them, each targeted linear layer
// is compressed (GPTQ / SparseGPT / RTN — on W, or on Δ = W_f − W_b in delta mode), the layer's
// weights are replaced by their reconstructions (W_b + Δ̃ in delta mode), and a second pass
// produces the next layer's inputs from the compressed layer. In delta mode the LM head's Δ is
// then compressed densely by GPTQ on the final-normed outputs of the compressed layers (its
// input), a block of rows at a time, as the delta format stores the head densely. Memory: the
// hidden states of the calibration set, one layer's Hessians, and the activations of one chunk of
// sequences; each layer's weights leave memory once it is done, and each compressed linear goes to
// the sink (a writer streaming the output) as it is done: one layer's weights at a time.
#pragma once

#include "compress/calibration.hpp"
#include "compress/recipe.hpp"
#include "model/model_config.hpp"
#include "quant/gptq.hpp"
#include "runtime/activation_precision.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace optkit::compress {

struct CompressedLinear {
  std::string module; // HF path, e.g. model.layers.0.self_attn.q_proj
  quant::CompressedMatrix matrix;
  bool sparse_2_4 = false; // pruned 2:4 (the delta format stores it compactly) or dense
  // NVFP4 activations: the global scale of the linear's inputs, 448·6 / their largest |x| over
  // the calibration set.
  std::optional<float> input_global_scale;
};

struct LayerReport {
  std::string module;
  double relative_error = 0; // ‖(W − Ŵ)X‖² / ‖WX‖² on the calibration inputs (Frobenius without them)
  double gptq_loss = 0;
  double dampening = 0;
  int damping_attempts = 0;
  std::int64_t calibration_tokens = -1; // an expert's: the calibration tokens routed to it (-1: not an expert)
};

struct LayerwiseResult {
  std::vector<LayerReport> reports;
  double calibration_loss = 0; // mean relative output error over compressed layers
};

class CompressedLayerSink {
public:
  virtual ~CompressedLayerSink() = default;
  // A compressed linear; in delta mode the LM head's comes as blocks of its rows, in order.
  virtual void add_linear(const CompressedLinear& linear) = 0;
  // `computed`: the layer's tensors made while compressing it, by name: norm weights with
  // SmoothQuant's or AWQ's factors folded in, FP8 KV-cache scales.
  virtual void end_layer(std::int64_t layer, const std::map<std::string, std::vector<float>>& computed) = 0;
};

struct LayerwiseOptions {
  std::filesystem::path model;
  std::optional<std::filesystem::path> base; // delta mode: compress model − base
  const CalibrationSet* calibration = nullptr;
  unsigned threads = 0;
  // How BF16 weights multiply activations in the calibration pass (runtime/activation_precision.hpp).
  runtime::ActivationPrecision activations = runtime::ActivationPrecision::fp32;
  // Called with (layers done, layers) before the first layer and after each.
  std::function<void(std::int64_t done, std::int64_t total)> progress;
  // A mixture of experts' calibration: every calibration token through every expert for the
  // experts' Hessians (llm-compressor's all-experts calibration; rarely routed experts get data),
  // while the layer's output keeps the real top-k routing. Off: each expert sees its own rows.
  bool all_experts = false;
  // Where each compressed linear goes as soon as it is compressed, and each layer's folded norms
  // when the layer is done (a writer streaming the model out). Required.
  CompressedLayerSink* sink = nullptr;
  // Where the calibration set's hidden states spill (runtime/hidden_states.hpp); none: in memory.
  std::optional<std::filesystem::path> spill_dir;
};

// The weights' quantization of a decoder layer's linear `module` (HF path), or none when the
// recipe leaves it as it is (not targeted, ignored, or kept at 16 bits by a plan).
std::optional<quant::QuantArgs> compressed_weight_args(const Recipe& recipe, std::int64_t layer,
                                                       const std::string& module);

// Whether the recipe compresses `module` (targets Linear or a match, and not ignored).
bool recipe_targets(const Recipe& recipe, const std::string& module);

// Whether compress delta compresses the LM head's Δ by calibration after the decoder layers (an
// untied head, targeted by the recipe), rather than rounding it as the embeddings' Δ is.
bool calibrates_head_delta(const Recipe& recipe, const model::ModelConfig& config);

LayerwiseResult compress_layers(const Recipe& recipe, const LayerwiseOptions& options);

} // namespace optkit::compress
