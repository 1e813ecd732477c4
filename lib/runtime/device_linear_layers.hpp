// A served model's linear layers on a CUDA device (`serve-deltas --device cuda`): every decoder
// layer's seven projections and the LM head uploaded once as fp32, each served variant's compressed
// Δs packed in a slot beside them. A batch's base product runs in cuBLASLt over all its rows and
// the variants' Δ products in one SBMM launch over their row segments (DeltaZip §5.2); the rest of
// the pass — norms, RoPE, attention over the KV cache, LoRA factors, matrices a variant stores
// whole, Δs the kernel does not take — stays on the CPU. Without CUDA in the build, or without a
// device, opening it throws and says which.
#pragma once

#include "runtime/decoder_pass.hpp"
#include "runtime/decoder_weights.hpp"
#include "runtime/delta_variant.hpp"

#include <cstdint>
#include <iterator>
#include <memory>
#include <string>

namespace optkit::runtime {

class DeviceLinearLayers {
public:
  // Opens CUDA device `device` and uploads the weights. Throws RuntimeFailure naming what is
  // missing (CUDA in this build, the device, cuBLASLt, device memory).
  DeviceLinearLayers(int device, const DecoderWeights& weights);
  ~DeviceLinearLayers();
  DeviceLinearLayers(const DeviceLinearLayers&) = delete;
  DeviceLinearLayers& operator=(const DeviceLinearLayers&) = delete;

  std::string device_name() const;
  // Uploads `variant`'s compressed Δs into slot `slot`, replacing what it held; nullptr empties it.
  void set_variant(std::int32_t slot, const DeltaVariant* variant);

  // The device's id of a decoder layer's projection, and of the LM head.
  int matrix(std::int64_t layer, Projection projection) const {
    return static_cast<int>(layer) * kProjections + static_cast<int>(projection);
  }
  int lm_head() const { return m_layers * kProjections; }
  // y[rows, out] = x[rows, in] · W_baseᵀ, plus x·Δᵀ on each of the batch's segments whose variant
  // this holds a Δ of `matrix` for; the caller applies the rest (holds() is false there).
  void multiply(int matrix, const float* x, std::int64_t rows, const BatchRows& batch, float* y);
  bool holds(const DeltaVariant* variant, int matrix) const;
  std::uint64_t weight_bytes() const;
  std::uint64_t delta_bytes() const;

private:
  static constexpr int kProjections = static_cast<int>(std::size(kProjectionWeight));
  struct State; // the device and what each slot holds on it
  std::unique_ptr<State> m_state;
  int m_layers = 0;
};

} // namespace optkit::runtime
