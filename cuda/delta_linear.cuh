// A linear layer served with its fine-tuned variants decoupled on one CUDA device (DeltaZip's
// Eq. 2): the base weight is uploaded once and every variant keeps its Δ packed; a batch runs one
// cuBLASLt product over all its rows and one SBMM launch over the variants' row segments. Plain
// C++ interface: callers need no CUDA headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace optkit::cuda {

// One compressed Δ [rows, cols] in host memory, as the delta artifact packs it.
struct PackedDelta {
  int bits = 0;
  bool sparse = true;
  float offset = 0;
  std::int64_t words = 0, group_size = 0, groups = 0;
  const std::int32_t* values = nullptr;  // [rows, words]
  const std::uint8_t* indices = nullptr; // [rows, cols/8] when sparse
  const float* scales = nullptr;         // [rows, groups]
};

// Batch rows [row, row + count) belong to variant `variant` (an index into the deltas; −1: the base).
struct RowSegment {
  int row = 0, count = 0, variant = -1;
};

// Device times of one batch, in microseconds (median of repeated runs).
struct DeltaLinearTimings {
  double base_us = 0;      // the base product over every row
  double sbmm_us = 0;      // the one SBMM launch over the segments
  double layer_us = 0;     // both, as multiply() runs them
  double per_delta_us = 0; // the baseline: per variant, Δ decoded to dense fp32, then its own product
  double delta_bytes = 0;  // packed bytes of the Δs the batch reads
};

class DeltaLinearDevice {
public:
  // base: W [rows, cols] fp32 row-major. Throws std::runtime_error naming what is missing (device,
  // cuBLASLt) or which Δ the kernel does not take.
  DeltaLinearDevice(int device, const float* base, int rows, int cols, const std::vector<PackedDelta>& deltas);
  ~DeltaLinearDevice();
  DeltaLinearDevice(const DeltaLinearDevice&) = delete;
  DeltaLinearDevice& operator=(const DeltaLinearDevice&) = delete;

  std::string device_name() const;
  // y[m, rows] = x[m, cols] · W_baseᵀ, plus x_s · Δ_vᵀ on each variant segment s.
  void multiply(const float* x, int m, const std::vector<RowSegment>& segments, float* y);
  // Only the Δ products: y[m, rows] = x_s · Δ_vᵀ on the variant segments (zero elsewhere), by the
  // SBMM launch or, with `per_delta`, by the baseline.
  void delta_products(const float* x, int m, const std::vector<RowSegment>& segments, float* y, bool per_delta);
  // Times the three ways on device-resident random x of m rows.
  DeltaLinearTimings time(int m, const std::vector<RowSegment>& segments);

private:
  struct State;
  std::unique_ptr<State> m_state;
};

} // namespace optkit::cuda
