// A model's linear layers on one CUDA device, each served with its fine-tuned variants decoupled
// (DeltaZip's Eq. 2): every base weight is uploaded once, each variant's Δ of it sits packed in a
// numbered slot, and a batch runs one cuBLASLt product over all its rows, then one SBMM launch
// over the variants' row segments. All matrices share one stream, cuBLASLt handle, workspace and
// batch buffers. Plain C++ interface: callers need no CUDA headers.
#pragma once

#include "delta_slots.cuh"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace optkit::cuda {

// Batch rows [row, row + count) belong to the variant in slot `slot` (−1: the base).
struct RowSegment {
  int row = 0, count = 0, slot = -1;
};

// Device times of one batch, in microseconds (median of repeated runs).
struct DeltaLinearTimings {
  double base_us = 0;      // the base product over every row
  double sbmm_us = 0;      // the one SBMM launch over the segments
  double layer_us = 0;     // both, as multiply() runs them
  double per_delta_us = 0; // the baseline: per variant, Δ decoded to dense fp32, then its own product
  double delta_bytes = 0;  // packed bytes of the Δs the batch reads
};

class DeviceLinears {
public:
  // Opens device `device` and cuBLASLt; throws std::runtime_error naming what is missing.
  explicit DeviceLinears(int device);
  ~DeviceLinears();
  DeviceLinears(const DeviceLinears&) = delete;
  DeviceLinears& operator=(const DeviceLinears&) = delete;

  std::string device_name() const;
  // Whether set_delta takes `delta` for a matrix of `cols` columns: 2, 4 or 8 bits, columns a
  // multiple of 8, one scale per group.
  static bool takes(const PackedDelta& delta, int cols);
  // Uploads W [rows, cols] fp32 row-major; returns the matrix's id (0, 1, ... in order).
  int add_matrix(const float* w, int rows, int cols);
  // Puts `delta` in slot `slot` of matrix `matrix`, replacing what the slot held there. Throws,
  // changing nothing, when the SBMM kernel does not take the Δ (it names why).
  void set_delta(int matrix, int slot, const PackedDelta& delta);
  // Empties slot `slot` in every matrix and frees its device memory.
  void clear_slot(int slot);
  // y[m, rows] = x[m, cols] · Wᵀ, plus x_s · Δᵀ on each segment whose slot holds a Δ of this
  // matrix (a segment of an empty slot gets the base product only).
  void multiply(int matrix, const float* x, int m, const std::vector<RowSegment>& segments, float* y);
  // Only the Δ products: y[m, rows] = x_s · Δᵀ on the segments (zero elsewhere), by the SBMM
  // launch or, with `per_delta`, by the baseline.
  void delta_products(int matrix, const float* x, int m, const std::vector<RowSegment>& segments, float* y,
                      bool per_delta);
  // Times the ways above on device-resident random x of m rows.
  DeltaLinearTimings time(int matrix, int m, const std::vector<RowSegment>& segments);
  // Device bytes held: base weights and packed Δs.
  std::uint64_t weight_bytes() const;
  std::uint64_t delta_bytes() const;

private:
  struct State;
  std::unique_ptr<State> m_state;
};

} // namespace optkit::cuda
