#include "delta_linear.cuh"

#include "check.cuh"
#include "device_session.cuh"
#include "fill.cuh"
#include "gemm.cuh"
#include "sbmm.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace optkit::cuda {

namespace {

// Device memory for `count` values of T, grown on demand (the old contents are not kept).
template <class T> struct DeviceArray {
  T* data = nullptr;
  std::size_t capacity = 0;

  DeviceArray() = default;
  DeviceArray(DeviceArray&& other) noexcept : data(other.data), capacity(other.capacity) {
    other.data = nullptr;
    other.capacity = 0;
  }
  DeviceArray& operator=(DeviceArray&&) = delete;
  DeviceArray(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (data != nullptr)
      cudaFree(data);
  }

  void reserve(std::size_t count) {
    if (count <= capacity)
      return;
    if (data != nullptr)
      check(cudaFree(data), "cudaFree");
    data = nullptr;
    capacity = 0;
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(T)), "cudaMalloc");
    data = static_cast<T*>(p);
    capacity = count;
  }
  void upload(const T* host, std::size_t count) {
    reserve(count);
    check(cudaMemcpy(data, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  }
};

} // namespace

struct DeltaLinearDevice::State : DeviceSession {
  int rows = 0, cols = 0;
  DeviceArray<float> base;
  std::vector<DeviceArray<std::int32_t>> values;
  std::vector<DeviceArray<std::uint8_t>> indices;
  std::vector<DeviceArray<float>> scales;
  std::vector<SbmmDelta> deltas; // host copies of what device_deltas holds
  DeviceArray<SbmmDelta> device_deltas;
  std::vector<std::int64_t> packed_bytes;
  std::map<int, std::unique_ptr<LtMatmul>> products; // by row count
  // Per-batch buffers.
  DeviceArray<float> x, y, dense;
  DeviceArray<SbmmTile> tiles;

  State(int device, int r, int c) : DeviceSession(device), rows(r), cols(c) {}
  ~State() {
    cudaDeviceSynchronize();
    products.clear(); // before the session's cuBLASLt handle; the arrays free themselves
  }

  // Column-major: D (rows × m) = op(A: cols × rows)ᵀ · B (cols × m), fp32 throughout.
  const LtMatmul& product(int m) {
    auto& p = products[m];
    if (!p) {
      const Operand a{CUDA_R_32F, cols, rows, cols}, b{CUDA_R_32F, cols, m, cols}, d{CUDA_R_32F, rows, m, rows};
      p = std::make_unique<LtMatmul>(lt, handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUBLAS_OP_T, CUBLAS_OP_N, a, b, d,
                                     kWorkspaceBytes, 1.0f);
    }
    return *p;
  }
  // Checks the segments against the batch, sizes the batch buffers and uploads the SBMM tiles;
  // returns how many there are.
  int prepare(const std::vector<RowSegment>& segments, int m) {
    std::vector<SbmmTile> tile_list;
    for (const RowSegment& s : segments) {
      if (s.row < 0 || s.count < 0 || s.row + s.count > m)
        throw std::runtime_error("row segment [" + std::to_string(s.row) + ", " + std::to_string(s.row + s.count) +
                                 ") is outside the batch of " + std::to_string(m) + " rows");
      if (s.variant >= static_cast<int>(deltas.size()))
        throw std::runtime_error("row segment names variant " + std::to_string(s.variant) + " of " +
                                 std::to_string(deltas.size()));
      if (s.variant >= 0)
        append_sbmm_tiles(s.row, s.count, s.variant, tile_list);
    }
    x.reserve(std::size_t(m) * cols);
    y.reserve(std::size_t(m) * rows);
    tiles.reserve(tile_list.size());
    if (!tile_list.empty())
      check(cudaMemcpyAsync(tiles.data, tile_list.data(), tile_list.size() * sizeof(SbmmTile), cudaMemcpyHostToDevice,
                            stream),
            "cudaMemcpyAsync (tiles)");
    return static_cast<int>(tile_list.size());
  }
  void upload_x(const float* host, int m) {
    check(cudaMemcpyAsync(x.data, host, std::size_t(m) * cols * sizeof(float), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (x)");
  }
  void download_y(float* host, int m) {
    check(cudaMemcpyAsync(host, y.data, std::size_t(m) * rows * sizeof(float), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync (y)");
    check(cudaStreamSynchronize(stream), "the delta layer");
  }
  void run_base(int m) { product(m).run(base.data, x.data, y.data, workspace, stream); }
  void run_sbmm(int tile_count) {
    launch_sbmm(x.data, y.data, rows, cols, device_deltas.data, tiles.data, tile_count, stream);
  }
  void run_per_delta(const std::vector<RowSegment>& segments) {
    dense.reserve(std::size_t(rows) * cols);
    for (const RowSegment& s : segments) {
      if (s.variant < 0 || s.count == 0)
        continue;
      launch_decode_delta(deltas[static_cast<std::size_t>(s.variant)], rows, cols, dense.data, stream);
      product(s.count).run(dense.data, x.data + std::size_t(s.row) * cols, y.data + std::size_t(s.row) * rows,
                           workspace, stream);
    }
  }
};

DeltaLinearDevice::DeltaLinearDevice(int device, const float* base, int rows, int cols,
                                     const std::vector<PackedDelta>& deltas)
    : m_state(std::make_unique<State>(device, rows, cols)) {
  State& s = *m_state;
  s.base.upload(base, std::size_t(rows) * cols);
  s.values.resize(deltas.size());
  s.indices.resize(deltas.size());
  s.scales.resize(deltas.size());
  for (std::size_t v = 0; v < deltas.size(); ++v) {
    const PackedDelta& p = deltas[v];
    SbmmDelta d;
    d.bits = p.bits;
    d.sparse = p.sparse ? 1 : 0;
    d.offset = p.offset;
    d.words = static_cast<int>(p.words);
    d.groups = static_cast<int>(p.groups);
    d.group_size = static_cast<int>(p.group_size);
    if (!sbmm_supports(d, cols) || p.values == nullptr || p.scales == nullptr || (p.sparse && p.indices == nullptr) ||
        p.group_size < 1 || (cols - 1) / p.group_size >= p.groups)
      throw std::runtime_error("delta " + std::to_string(v) +
                               ": SBMM takes 2, 4 or 8-bit Δs with columns a multiple "
                               "of 8 and one scale per group (got " +
                               std::to_string(p.bits) + " bits, " + std::to_string(cols) + " columns)");
    s.values[v].upload(p.values, std::size_t(rows) * p.words);
    d.values = s.values[v].data;
    if (p.sparse) {
      s.indices[v].upload(p.indices, std::size_t(rows) * (cols / 8));
      d.indices = s.indices[v].data;
    }
    s.scales[v].upload(p.scales, std::size_t(rows) * p.groups);
    d.scales = s.scales[v].data;
    s.deltas.push_back(d);
    s.packed_bytes.push_back(std::int64_t(rows) * (p.words * 4 + (p.sparse ? cols / 8 : 0) + p.groups * 4));
  }
  s.device_deltas.upload(s.deltas.data(), s.deltas.size());
  // cudaMemcpy from pageable memory may return before its DMA lands, and the non-blocking stream
  // the kernels run on does not wait for it.
  check(cudaDeviceSynchronize(), "uploads");
}

DeltaLinearDevice::~DeltaLinearDevice() = default;

std::string
DeltaLinearDevice::device_name() const {
  return m_state->properties.name;
}

void
DeltaLinearDevice::multiply(const float* x, int m, const std::vector<RowSegment>& segments, float* y) {
  State& s = *m_state;
  const int tile_count = s.prepare(segments, m);
  s.upload_x(x, m);
  s.run_base(m);
  s.run_sbmm(tile_count);
  s.download_y(y, m);
}

void
DeltaLinearDevice::delta_products(const float* x, int m, const std::vector<RowSegment>& segments, float* y,
                                  bool per_delta) {
  State& s = *m_state;
  const int tile_count = s.prepare(segments, m);
  s.upload_x(x, m);
  check(cudaMemsetAsync(s.y.data, 0, std::size_t(m) * s.rows * sizeof(float), s.stream), "cudaMemsetAsync");
  if (per_delta)
    s.run_per_delta(segments);
  else
    s.run_sbmm(tile_count);
  s.download_y(y, m);
}

DeltaLinearTimings
DeltaLinearDevice::time(int m, const std::vector<RowSegment>& segments) {
  State& s = *m_state;
  const int tile_count = s.prepare(segments, m);
  fill_finite_bytes(s.x.data, std::size_t(m) * s.cols * sizeof(float), 11, s.stream);
  DeltaLinearTimings t;
  t.base_us = s.time_us([&] { s.run_base(m); });
  t.sbmm_us = s.time_us([&] { s.run_sbmm(tile_count); });
  t.layer_us = s.time_us([&] {
    s.run_base(m);
    s.run_sbmm(tile_count);
  });
  t.per_delta_us = s.time_us([&] { s.run_per_delta(segments); });
  for (const RowSegment& seg : segments)
    if (seg.variant >= 0 && seg.count > 0)
      t.delta_bytes += static_cast<double>(s.packed_bytes[static_cast<std::size_t>(seg.variant)]);
  return t;
}

} // namespace optkit::cuda
