#include "device_linears.cuh"

#include "check.cuh"
#include "delta_slots.cuh"
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

struct Matrix {
  int rows = 0, cols = 0;
  DeviceArray<float> weight;
  DeltaSlots deltas;

  Matrix(int r, int c) : rows(r), cols(c), deltas(r, c) {}
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
      if (w.deltas.holds(s.slot))
        append_sbmm_tiles(s.row, s.count, s.slot, tile_list);
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
  void run_sbmm(Matrix& w, int tile_count) {
    if (tile_count > 0)
      launch_sbmm(x.data, y.data, w.rows, w.cols, w.deltas.table(stream), tiles.data, tile_count, stream);
  }
  void run_per_delta(const Matrix& w, const std::vector<RowSegment>& segments) {
    dense.reserve(std::size_t(w.rows) * w.cols);
    for (const RowSegment& s : segments) {
      if (!w.deltas.holds(s.slot) || s.count == 0)
        continue;
      launch_decode_delta(w.deltas.view(s.slot), w.rows, w.cols, dense.data, stream);
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
  auto matrix = std::make_unique<Matrix>(rows, cols);
  matrix->weight.upload(w, std::size_t(rows) * cols);
  check(cudaDeviceSynchronize(), "uploads");
  m_state->matrices.push_back(std::move(matrix));
  return static_cast<int>(m_state->matrices.size()) - 1;
}

bool
DeviceLinears::takes(const PackedDelta& p, int cols) {
  return sbmm_takes(p, cols);
}

void
DeviceLinears::set_delta(int matrix, int slot, const PackedDelta& p) {
  m_state->matrix(matrix).deltas.set(slot, p);
}

void
DeviceLinears::clear_slot(int slot) {
  if (slot < 0)
    return;
  m_state->make_current();
  for (auto& w : m_state->matrices)
    w->deltas.clear(slot);
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
    if (seg.count > 0)
      t.delta_bytes += static_cast<double>(w.deltas.bytes(seg.slot));
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
    bytes += w->deltas.bytes();
  return bytes;
}

} // namespace optkit::cuda
