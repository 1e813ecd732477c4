// A decoder-only model's whole forward step on one CUDA device (serve-deltas --device cuda):
// weights resident in BF16 (or fp32, for exact comparison with the CPU), products in cuBLASLt
// (BF16 tensor cores, fp32 accumulation and outputs), the served variants' compressed Δs by one
// SBMM launch per matrix over the step's variant segments (DeltaZip §5.2), keys and values in a
// paged cache in device memory whose block ids are the host's block tables', norms, RoPE and
// attention on the device. A step uploads its rows' embeddings and metadata, runs every layer
// and returns the logits of its output rows: one host synchronization. Plain C++ interface.
#pragma once

#include "delta_slots.cuh"

#include <cstdint>
#include <memory>
#include <string>

namespace optkit::cuda {

struct DecoderDims {
  int layers = 0, hidden = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  float eps = 1e-6f;
  int sliding_window = 0; // 0: none
  bool qkv_bias = false, qk_norm = false;
};

// A layer's vectors; the final norm is layer `layers`' input_norm.
enum class DecoderVector { input_norm, post_norm, q_bias, k_bias, v_bias, q_norm, k_norm };
inline constexpr int kDecoderVectors = 7;
inline constexpr int kDecoderProjections = 7; // q, k, v, o, gate, up, down

// One step, in host memory. Rows are query tokens; a variant's rows are consecutive.
struct DecoderStep {
  int rows = 0;
  const float* embeddings = nullptr; // [rows, hidden]
  const int* slot = nullptr;         // [rows]: variant slot, −1: the base
  const int* position = nullptr;     // [rows]
  const int* table_start = nullptr;  // [rows]: the row's sequence's block table in `tables`
  const int* tables = nullptr;       // block tables, one after another
  int table_size = 0;
  int outputs = 0;                 // rows whose logits come back
  const int* output_row = nullptr; // [outputs]: which rows
};

class DeviceDecoder {
public:
  // Opens device `device` and cuBLASLt; `bf16` chooses BF16 weights and cache (else fp32).
  // Throws std::runtime_error naming what is missing or unsupported.
  DeviceDecoder(int device, const DecoderDims& dims, bool bf16, int block_tokens);
  ~DeviceDecoder();
  DeviceDecoder(const DeviceDecoder&) = delete;
  DeviceDecoder& operator=(const DeviceDecoder&) = delete;

  std::string device_name() const;
  // Why this model's attention cannot run here (empty: it can).
  static std::string unsupported(const DecoderDims& dims);

  // Uploads layer `layer`'s projection `projection` [rows, cols] fp32 row-major (converted to the
  // weights' type); layer == layers is the LM head (projection ignored).
  void set_matrix(int layer, int projection, const float* w, int rows, int cols);
  // Layer `layer`'s vector for slot `slot` (−1: the base; a slot without its own uses the base's).
  void set_vector(int layer, DecoderVector which, int slot, const float* v, int n);
  void set_inverse_frequencies(const float* inverse_frequency); // head_dim / 2
  // Slot `slot`'s Δ of a matrix (as set_matrix numbers it). Throws, changing nothing, when SBMM
  // does not take it.
  void set_delta(int layer, int projection, int slot, const PackedDelta& delta);
  // Forgets everything slot `slot` holds.
  void clear_slot(int slot);

  // Bytes one cache block takes (every layer's keys and values), and the device's free bytes.
  std::uint64_t kv_block_bytes() const;
  std::uint64_t free_bytes() const;
  // Allocates the paged cache: `blocks` blocks of block_tokens positions.
  void allocate_kv(std::int64_t blocks);

  // Runs the step; logits: [outputs, vocab].
  void forward(const DecoderStep& step, float* logits);

  std::uint64_t weight_bytes() const;
  std::uint64_t delta_bytes() const;

private:
  struct State;
  std::unique_ptr<State> m_state;
};

} // namespace optkit::cuda
