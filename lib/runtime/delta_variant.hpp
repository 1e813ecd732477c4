// A fine-tuned variant served beside its base without merging (DeltaZip's decoupling, seed §5):
// the base weights are shared, the variant keeps each Δ compressed as `optkit compress delta`
// stored it, and a batch computes one base product over all its rows, then adds x·Δᵀ over each
// contiguous segment of rows that belong to a variant — decoding Δ a block of rows at a time,
// never as a whole dense matrix. The variant's own norms and biases replace the base's on its
// rows; a matrix it stores whole replaces the base product on its rows. A PEFT LoRA adapter is
// served the same way, its Δ = scale·B·A kept as the two factors (runtime/lora_adapter.hpp).
#pragma once

#include "core/thread_pool.hpp"
#include "quant/delta_format.hpp"
#include "runtime/decoder_weights.hpp"
#include "runtime/delta_decode.hpp"
#include "runtime/lora_adapter.hpp"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace optkit::runtime {

// One compressed Δ (2:4 sparse or dense quantized, packed), viewed in the artifact's bytes.
class CompressedDelta {
public:
  // nullptr when the artifact has no Δ for `module`; InputError when its tensors do not fit.
  static std::unique_ptr<CompressedDelta> load(const quant::DeltaArtifact& artifact, const std::string& module,
                                               std::int64_t rows, std::int64_t cols);
  std::int64_t rows() const { return m_rows; }
  std::int64_t cols() const { return m_codes.cols; }
  // y[m, rows] += x[m, cols] · Δᵀ (y's rows are `ldy` floats apart). With int8 activations (see
  // set_int8_activations) x is quantized to int8 per row first, and every row goes through the
  // integer kernel (runtime/delta_int8.hpp).
  void multiply_add(const float* x, std::int64_t m, float* y, std::int64_t ldy, ThreadPool& pool) const;
  // out[cols] += Δ[r, :]
  void row_add(std::int64_t r, float* out) const;
  // Δ rows [r0, r0 + n) as fp32, into out[n, cols].
  void decode_rows(std::int64_t r0, std::int64_t n, float* out) const;
  std::uint64_t storage_bytes() const;
  // Multiplies with x quantized to int8 per row where the integer kernel takes this Δ on this CPU
  // (off: fp32 activations, the merged model's product to fp32 rounding). Off after load().
  void set_int8_activations(bool on);
  bool int8_activations() const { return m_integer_kernel; }
  // The packed form as stored, for a device to take as it is.
  const DeltaCodes& codes() const { return m_codes; }

private:
  std::int64_t m_rows = 0;
  DeltaCodes m_codes;             // its scales are m_scales'
  bool m_integer_capable = false; // delta_int8_supported
  bool m_integer_kernel = false;
  std::vector<float> m_scales;
  std::vector<float> m_int8_offsets; // delta_int8_row_offsets, where the integer kernel takes this Δ
};

// How a variant changes one matrix: nothing, a compressed Δ, a LoRA's low-rank Δ, or a whole
// matrix of its own.
struct VariantMatrix {
  std::unique_ptr<CompressedDelta> delta;
  std::unique_ptr<LowRankDelta> low_rank;
  std::unique_ptr<LinearWeight> whole;
};

// The variant's own copies of the base layer's vectors (DecoderLayerWeights says what each is).
struct VariantLayer {
  std::vector<float> input_norm, attention_out_norm, mlp_norm, mlp_out_norm, q_bias, k_bias, v_bias, q_norm, k_norm;
  VariantMatrix q, k, v, o, gate, up, down;
};

class DeltaVariant {
public:
  // `delta_dir`: an optkit delta artifact, or a PEFT LoRA adapter (adapter_config.json). Throws
  // InputError when the artifact is not a delta of `base_dir` (weights SHA-256) or does not fit
  // the base's shapes. `checkpoint`, when given, runs before each layer is read: it throws to
  // abandon the load (a server's load timeout, or its shutdown).
  DeltaVariant(const DecoderWeights& base, const std::filesystem::path& base_dir,
               const std::filesystem::path& delta_dir, const std::function<void()>& checkpoint = {});

  const VariantLayer& layer(std::int64_t index) const { return m_layers.at(static_cast<std::size_t>(index)); }
  const VariantMatrix& embedding() const { return m_embedding; }
  // With tied embeddings the LM head is the embedding, Δ included.
  const VariantMatrix& lm_head() const { return m_tied ? m_embedding : m_lm_head; }
  const std::vector<float>& final_norm() const { return m_final_norm; }
  // Bytes this variant holds beyond the shared base (compressed Δs, whole matrices, norms).
  std::uint64_t resident_bytes() const;
  // Every compressed Δ's CompressedDelta::set_int8_activations.
  void set_int8_activations(bool on);

private:
  void load_lora(const DecoderWeights& base, const std::filesystem::path& dir, const std::function<void()>& checkpoint);

  std::unique_ptr<quant::DeltaArtifact> m_artifact; // the packed Δs point into its bytes (none for LoRA)
  std::vector<VariantLayer> m_layers;
  VariantMatrix m_embedding, m_lm_head;
  bool m_tied = false;
  std::vector<float> m_final_norm;
};

// The variant's product for m rows of x, where y[m, rows] already holds x·W_baseᵀ: adds x·Δᵀ, or
// replaces it with x·W_variantᵀ when the variant stores the matrix whole.
void apply_variant(const VariantMatrix& matrix, const float* x, std::int64_t m, float* y, ThreadPool& pool);

} // namespace optkit::runtime
