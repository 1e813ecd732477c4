#include "device_linears.cuh"

#include "check.cuh"
#include "device_array.cuh"
#include "device_session.cuh"
#include "fill.cuh"
#include "gemm.cuh"
#include "sbmm.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

namespace optkit::cuda {

namespace {

// One variant's packed Δ of one matrix, on the device.
struct SlotDelta {
  DeviceArray<std::int32_t> values;
  DeviceArray<std::uint8_t> indices;
  DeviceArray<float> scales;
  SbmmDelta view;
  std::uint64_t bytes = 0;
};

struct Matrix {
  int rows = 0, cols = 0;
  DeviceArray<float> weight;
  std::vector<std::unique_ptr<SlotDelta>> slots; // by slot; null: the slot holds no Δ of this matrix
  std::vector<SbmmDelta> table;                  // the slots' views, as the kernel indexes them
  DeviceArray<SbmmDelta> device_table;
  bool table_stale = false;

  const SlotDelta* slot(int s) const {
    return s >= 0 && s < static_cast<int>(slots.size()) ? slots[static_cast<std::size_t>(s)].get() : nullptr;
  }
};

} // namespace

struct DeviceLinears::State : DeviceSession {
  std::vector<std::unique_ptr<Matrix>> matrices;
  std::map<std::tuple<int, int, int>, std::unique_ptr<LtMatmul>> products; // by (rows, cols, m)
  // Per-batch buffers, shared by every matrix.
  DeviceArray<float> x, y, dense;
  DeviceArray<SbmmTile> tiles;

  // Members go before the session: the products before its cuBLASLt handle, the arrays (cudaFree
  // waits for the device) before its stream.
  explicit State(int device) : DeviceSession(device) {}

  Matrix& matrix(int id) {
    make_current();
    if (id < 0 || id >= static_cast<int>(matrices.size()))
      throw std::runtime_error("no device matrix " + std::to_string(id) + " (" + std::to_string(matrices.size()) +
                               " uploaded)");
    return *matrices[static_cast<std::size_t>(id)];
  }
  // Column-major: D (rows × m) = op(A: cols × rows)ᵀ · B (cols × m), fp32 throughout.
  const LtMatmul& product(int rows, int cols, int m) {
    auto& p = products[{rows, cols, m}];
    if (!p) {
      const Operand a{CUDA_R_32F, cols, rows, cols}, b{CUDA_R_32F, cols, m, cols}, d{CUDA_R_32F, rows, m, rows};
      p = std::make_unique<LtMatmul>(lt, handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUBLAS_OP_T, CUBLAS_OP_N, a, b, d,
                                     kWorkspaceBytes, 1.0f);
    }
    return *p;
  }
  // Checks the segments against the batch, sizes the batch buffers, uploads the matrix's slot
  // table if it changed and the SBMM tiles; returns how many tiles there are.
  int prepare(Matrix& w, const std::vector<RowSegment>& segments, int m) {
    if (m < 1)
      throw std::runtime_error("a device product needs at least one row (got " + std::to_string(m) + ")");
    std::vector<SbmmTile> tile_list;
    for (const RowSegment& s : segments) {
      if (s.row < 0 || s.count < 0 || s.row + s.count > m)
        throw std::runtime_error("row segment [" + std::to_string(s.row) + ", " + std::to_string(s.row + s.count) +
                                 ") is outside the batch of " + std::to_string(m) + " rows");
      if (s.slot < -1)
        throw std::runtime_error("row segment names slot " + std::to_string(s.slot));
      if (w.slot(s.slot) != nullptr)
        append_sbmm_tiles(s.row, s.count, s.slot, tile_list);
    }
    if (w.table_stale) {
      w.device_table.reserve(w.table.size());
      check(cudaMemcpyAsync(w.device_table.data, w.table.data(), w.table.size() * sizeof(SbmmDelta),
                            cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (slot table)");
      w.table_stale = false;
    }
    x.reserve(std::size_t(m) * w.cols);
    y.reserve(std::size_t(m) * w.rows);
    tiles.reserve(tile_list.size());
    if (!tile_list.empty())
      check(cudaMemcpyAsync(tiles.data, tile_list.data(), tile_list.size() * sizeof(SbmmTile), cudaMemcpyHostToDevice,
                            stream),
            "cudaMemcpyAsync (tiles)");
    return static_cast<int>(tile_list.size());
  }
  void upload_x(const Matrix& w, const float* host, int m) {
    check(cudaMemcpyAsync(x.data, host, std::size_t(m) * w.cols * sizeof(float), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (x)");
  }
  void download_y(const Matrix& w, float* host, int m) {
    check(cudaMemcpyAsync(host, y.data, std::size_t(m) * w.rows * sizeof(float), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync (y)");
    check(cudaStreamSynchronize(stream), "the device linear layer");
  }
  void run_base(const Matrix& w, int m) {
    product(w.rows, w.cols, m).run(w.weight.data, x.data, y.data, workspace, stream);
  }
  void run_sbmm(const Matrix& w, int tile_count) {
    if (tile_count > 0)
      launch_sbmm(x.data, y.data, w.rows, w.cols, w.device_table.data, tiles.data, tile_count, stream);
  }
  void run_per_delta(const Matrix& w, const std::vector<RowSegment>& segments) {
    dense.reserve(std::size_t(w.rows) * w.cols);
    for (const RowSegment& s : segments) {
      const SlotDelta* delta = w.slot(s.slot);
      if (delta == nullptr || s.count == 0)
        continue;
      launch_decode_delta(delta->view, w.rows, w.cols, dense.data, stream);
      product(w.rows, w.cols, s.count)
          .run(dense.data, x.data + std::size_t(s.row) * w.cols, y.data + std::size_t(s.row) * w.rows, workspace,
               stream);
    }
  }
};

DeviceLinears::DeviceLinears(int device) : m_state(std::make_unique<State>(device)) {}

DeviceLinears::~DeviceLinears() = default;

std::string
DeviceLinears::device_name() const {
  return m_state->properties.name;
}

int
DeviceLinears::add_matrix(const float* w, int rows, int cols) {
  m_state->make_current();
  if (rows < 1 || cols < 1)
    throw std::runtime_error("a device matrix needs rows and columns (got " + std::to_string(rows) + " × " +
                             std::to_string(cols) + ")");
  auto matrix = std::make_unique<Matrix>();
  matrix->rows = rows;
  matrix->cols = cols;
  matrix->weight.upload(w, std::size_t(rows) * cols);
  check(cudaDeviceSynchronize(), "uploads");
  m_state->matrices.push_back(std::move(matrix));
  return static_cast<int>(m_state->matrices.size()) - 1;
}

namespace {

SbmmDelta
sbmm_view(const PackedDelta& p) {
  SbmmDelta d;
  d.bits = p.bits;
  d.sparse = p.sparse ? 1 : 0;
  d.offset = p.offset;
  d.words = static_cast<int>(p.words);
  d.groups = static_cast<int>(p.groups);
  d.group_size = static_cast<int>(p.group_size);
  return d;
}

} // namespace

bool
DeviceLinears::takes(const PackedDelta& p, int cols) {
  return sbmm_supports(sbmm_view(p), cols) && p.values != nullptr && p.scales != nullptr &&
         (!p.sparse || p.indices != nullptr) && p.group_size >= 1 && (cols - 1) / p.group_size < p.groups;
}

void
DeviceLinears::set_delta(int matrix, int slot, const PackedDelta& p) {
  Matrix& w = m_state->matrix(matrix);
  if (slot < 0 || slot > 1'000'000)
    throw std::runtime_error("delta slot " + std::to_string(slot) + " is out of range");
  if (!takes(p, w.cols))
    throw std::runtime_error("SBMM takes 2, 4 or 8-bit Δs with columns a multiple of 8 and one scale per group (got " +
                             std::to_string(p.bits) + " bits, " + std::to_string(w.cols) + " columns)");
  SbmmDelta d = sbmm_view(p);
  auto delta = std::make_unique<SlotDelta>();
  delta->values.upload(p.values, std::size_t(w.rows) * p.words);
  d.values = delta->values.data;
  if (p.sparse) {
    delta->indices.upload(p.indices, std::size_t(w.rows) * (w.cols / 8));
    d.indices = delta->indices.data;
  }
  delta->scales.upload(p.scales, std::size_t(w.rows) * p.groups);
  d.scales = delta->scales.data;
  check(cudaDeviceSynchronize(), "uploads");
  delta->view = d;
  delta->bytes = std::uint64_t(w.rows) * std::uint64_t(p.words * 4 + (p.sparse ? w.cols / 8 : 0) + p.groups * 4);
  const auto index = static_cast<std::size_t>(slot);
  if (index >= w.slots.size()) {
    w.slots.resize(index + 1);
    w.table.resize(index + 1);
  }
  w.slots[index] = std::move(delta); // frees the Δ the slot held (cudaFree waits for the device)
  w.table[index] = d;
  w.table_stale = true;
}

void
DeviceLinears::clear_slot(int slot) {
  if (slot < 0)
    return;
  m_state->make_current();
  const auto index = static_cast<std::size_t>(slot);
  for (auto& w : m_state->matrices)
    if (index < w->slots.size() && w->slots[index]) {
      w->slots[index].reset();
      w->table[index] = SbmmDelta{};
      w->table_stale = true;
    }
}

void
DeviceLinears::multiply(int matrix, const float* x, int m, const std::vector<RowSegment>& segments, float* y) {
  State& s = *m_state;
  Matrix& w = s.matrix(matrix);
  const int tile_count = s.prepare(w, segments, m);
  s.upload_x(w, x, m);
  s.run_base(w, m);
  s.run_sbmm(w, tile_count);
  s.download_y(w, y, m);
}

void
DeviceLinears::delta_products(int matrix, const float* x, int m, const std::vector<RowSegment>& segments, float* y,
                              bool per_delta) {
  State& s = *m_state;
  Matrix& w = s.matrix(matrix);
  const int tile_count = s.prepare(w, segments, m);
  s.upload_x(w, x, m);
  check(cudaMemsetAsync(s.y.data, 0, std::size_t(m) * w.rows * sizeof(float), s.stream), "cudaMemsetAsync");
  if (per_delta)
    s.run_per_delta(w, segments);
  else
    s.run_sbmm(w, tile_count);
  s.download_y(w, y, m);
}

DeltaLinearTimings
DeviceLinears::time(int matrix, int m, const std::vector<RowSegment>& segments) {
  State& s = *m_state;
  Matrix& w = s.matrix(matrix);
  const int tile_count = s.prepare(w, segments, m);
  fill_finite_bytes(s.x.data, std::size_t(m) * w.cols * sizeof(float), 11, s.stream);
  DeltaLinearTimings t;
  t.base_us = s.time_us([&] { s.run_base(w, m); });
  t.sbmm_us = s.time_us([&] { s.run_sbmm(w, tile_count); });
  t.layer_us = s.time_us([&] {
    s.run_base(w, m);
    s.run_sbmm(w, tile_count);
  });
  t.per_delta_us = s.time_us([&] { s.run_per_delta(w, segments); });
  for (const RowSegment& seg : segments)
    if (const SlotDelta* delta = w.slot(seg.slot); delta != nullptr && seg.count > 0)
      t.delta_bytes += static_cast<double>(delta->bytes);
  return t;
}

std::uint64_t
DeviceLinears::weight_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& w : m_state->matrices)
    bytes += std::uint64_t(w->rows) * std::uint64_t(w->cols) * sizeof(float);
  return bytes;
}

std::uint64_t
DeviceLinears::delta_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& w : m_state->matrices)
    for (const auto& delta : w->slots)
      if (delta)
        bytes += delta->bytes;
  return bytes;
}

} // namespace optkit::cuda
