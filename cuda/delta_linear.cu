#include "delta_linear.cuh"

#include "check.cuh"
#include "fill.cuh"
#include "gemm.cuh"
#include "sbmm.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>

namespace optkit::cuda {

struct DeltaLinearDevice::State {
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;
  int device = 0, rows = 0, cols = 0;
  cudaDeviceProp properties{};
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  CublasLtLibrary lt;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  float* base = nullptr;
  std::vector<void*> allocations;
  std::vector<SbmmDelta> deltas; // device pointers
  SbmmDelta* device_deltas = nullptr;
  std::vector<std::int64_t> packed_bytes;
  std::map<int, std::unique_ptr<LtMatmul>> products; // by row count
  // Per-batch device buffers, grown on demand.
  float *x = nullptr, *y = nullptr, *dense = nullptr;
  SbmmTile* tiles = nullptr;
  std::size_t x_floats = 0, y_floats = 0, tile_capacity = 0;

  template <class T> T* allocate(std::size_t count) {
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(T)), "cudaMalloc");
    allocations.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T> T* upload(const T* host, std::size_t count) {
    T* p = allocate<T>(count);
    check(cudaMemcpy(p, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
    return p;
  }
  void reserve(int m, std::size_t tile_count) {
    const std::size_t xf = std::size_t(m) * cols, yf = std::size_t(m) * rows;
    if (xf > x_floats) {
      x = allocate<float>(xf);
      x_floats = xf;
    }
    if (yf > y_floats) {
      y = allocate<float>(yf);
      y_floats = yf;
    }
    if (tile_count > tile_capacity) {
      tiles = allocate<SbmmTile>(tile_count);
      tile_capacity = tile_count;
    }
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
  std::vector<SbmmSegment> segments(const std::vector<RowSegment>& in, int m) const {
    std::vector<SbmmSegment> out;
    for (const RowSegment& s : in) {
      if (s.row < 0 || s.count < 0 || s.row + s.count > m)
        throw std::runtime_error("row segment [" + std::to_string(s.row) + ", " + std::to_string(s.row + s.count) +
                                 ") is outside the batch of " + std::to_string(m) + " rows");
      if (s.variant >= static_cast<int>(deltas.size()))
        throw std::runtime_error("row segment names variant " + std::to_string(s.variant) + " of " +
                                 std::to_string(deltas.size()));
      out.push_back({s.row, s.count, s.variant});
    }
    return out;
  }
  int prepare_tiles(const std::vector<RowSegment>& in, int m) {
    const auto tile_list = sbmm_tiles(segments(in, m));
    reserve(m, tile_list.size());
    if (!tile_list.empty())
      check(
          cudaMemcpyAsync(tiles, tile_list.data(), tile_list.size() * sizeof(SbmmTile), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (tiles)");
    return static_cast<int>(tile_list.size());
  }
  void run_sbmm(int tile_count) { launch_sbmm(x, y, rows, cols, device_deltas, tiles, tile_count, stream); }
  void run_per_delta(const std::vector<RowSegment>& in) {
    if (dense == nullptr)
      dense = allocate<float>(std::size_t(rows) * cols);
    for (const RowSegment& s : in) {
      if (s.variant < 0 || s.count == 0)
        continue;
      launch_decode_delta(deltas[static_cast<std::size_t>(s.variant)], rows, cols, dense, stream);
      product(s.count).run(dense, x + std::size_t(s.row) * cols, y + std::size_t(s.row) * rows, workspace, stream);
    }
  }
  template <class Launch> double time_us(Launch&& launch) {
    launch();
    check(cudaStreamSynchronize(stream), "warm-up");
    std::vector<double> samples;
    for (int r = 0; r < 9; ++r) {
      float ms = 0;
      check(cudaEventRecord(start, stream), "cudaEventRecord");
      for (int i = 0; i < 20; ++i)
        launch();
      check(cudaEventRecord(stop, stream), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      samples.push_back(1000.0 * ms / 20);
    }
    check(cudaGetLastError(), "timed launches");
    std::nth_element(samples.begin(), samples.begin() + 4, samples.end());
    return samples[4];
  }
};

DeltaLinearDevice::DeltaLinearDevice(int device, const float* base, int rows, int cols,
                                     const std::vector<PackedDelta>& deltas)
    : m_state(std::make_unique<State>()) {
  State& s = *m_state;
  s.device = device;
  s.rows = rows;
  s.cols = cols;
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device < 0 || device >= count)
    throw std::runtime_error("no CUDA device " + std::to_string(device) + " (" + std::to_string(count) + " visible)");
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaGetDeviceProperties(&s.properties, device), "cudaGetDeviceProperties");
  check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&s.start), "cudaEventCreate");
  check(cudaEventCreate(&s.stop), "cudaEventCreate");
  s.lt.open();
  check(s.lt.create(&s.handle), "cublasLtCreate");
  s.workspace = s.allocate<char>(State::kWorkspaceBytes);
  s.base = s.upload(base, std::size_t(rows) * cols);
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
    d.values = s.upload(p.values, std::size_t(rows) * p.words);
    if (p.sparse)
      d.indices = s.upload(p.indices, std::size_t(rows) * (cols / 8));
    d.scales = s.upload(p.scales, std::size_t(rows) * p.groups);
    s.deltas.push_back(d);
    s.packed_bytes.push_back(std::int64_t(rows) * (p.words * 4 + (p.sparse ? cols / 8 : 0) + p.groups * 4));
  }
  s.device_deltas = s.upload(s.deltas.data(), s.deltas.size());
  // cudaMemcpy from pageable memory may return before its DMA lands, and the non-blocking stream
  // the kernels run on does not wait for it.
  check(cudaDeviceSynchronize(), "uploads");
}

DeltaLinearDevice::~DeltaLinearDevice() {
  State& s = *m_state;
  cudaDeviceSynchronize();
  s.products.clear();
  for (void* p : s.allocations)
    cudaFree(p);
  if (s.handle != nullptr)
    s.lt.destroy(s.handle);
  if (s.start != nullptr)
    cudaEventDestroy(s.start);
  if (s.stop != nullptr)
    cudaEventDestroy(s.stop);
  if (s.stream != nullptr)
    cudaStreamDestroy(s.stream);
}

std::string
DeltaLinearDevice::device_name() const {
  return m_state->properties.name;
}

void
DeltaLinearDevice::multiply(const float* x, int m, const std::vector<RowSegment>& segments, float* y) {
  State& s = *m_state;
  const int tile_count = s.prepare_tiles(segments, m);
  check(cudaMemcpyAsync(s.x, x, std::size_t(m) * s.cols * sizeof(float), cudaMemcpyHostToDevice, s.stream),
        "cudaMemcpyAsync (x)");
  s.product(m).run(s.base, s.x, s.y, s.workspace, s.stream);
  s.run_sbmm(tile_count);
  check(cudaMemcpyAsync(y, s.y, std::size_t(m) * s.rows * sizeof(float), cudaMemcpyDeviceToHost, s.stream),
        "cudaMemcpyAsync (y)");
  check(cudaStreamSynchronize(s.stream), "SBMM layer");
}

void
DeltaLinearDevice::delta_products(const float* x, int m, const std::vector<RowSegment>& segments, float* y,
                                  bool per_delta) {
  State& s = *m_state;
  const int tile_count = s.prepare_tiles(segments, m);
  check(cudaMemcpyAsync(s.x, x, std::size_t(m) * s.cols * sizeof(float), cudaMemcpyHostToDevice, s.stream),
        "cudaMemcpyAsync (x)");
  check(cudaMemsetAsync(s.y, 0, std::size_t(m) * s.rows * sizeof(float), s.stream), "cudaMemsetAsync");
  if (per_delta)
    s.run_per_delta(segments);
  else
    s.run_sbmm(tile_count);
  check(cudaMemcpyAsync(y, s.y, std::size_t(m) * s.rows * sizeof(float), cudaMemcpyDeviceToHost, s.stream),
        "cudaMemcpyAsync (y)");
  check(cudaStreamSynchronize(s.stream), "Δ products");
}

DeltaLinearTimings
DeltaLinearDevice::time(int m, const std::vector<RowSegment>& segments) {
  State& s = *m_state;
  const int tile_count = s.prepare_tiles(segments, m);
  fill_finite_bytes(s.x, std::size_t(m) * s.cols * sizeof(float), 11, s.stream);
  DeltaLinearTimings t;
  t.base_us = s.time_us([&] { s.product(m).run(s.base, s.x, s.y, s.workspace, s.stream); });
  t.sbmm_us = s.time_us([&] { s.run_sbmm(tile_count); });
  t.layer_us = s.time_us([&] {
    s.product(m).run(s.base, s.x, s.y, s.workspace, s.stream);
    s.run_sbmm(tile_count);
  });
  t.per_delta_us = s.time_us([&] { s.run_per_delta(segments); });
  for (const RowSegment& seg : segments)
    if (seg.variant >= 0 && seg.count > 0)
      t.delta_bytes += static_cast<double>(s.packed_bytes[static_cast<std::size_t>(seg.variant)]);
  return t;
}

} // namespace optkit::cuda
