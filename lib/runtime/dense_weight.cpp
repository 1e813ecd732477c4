// Dense F32/BF16/F16 weights. Few activation rows (decode): each thread streams its share of W's
// rows once through dot_rows (AVX-512 at batch 1 or AVX2+FMA on x86-64, portable loops elsewhere),
// which keeps decode bound by memory bandwidth. Many rows (prefill): the panel GEMM where the CPU
// has it (AMX tiles or AVX512_BF16 dot products for BF16 W, activations split into hi + lo BF16 so
// results stay within ~1e-5 of fp32, or rounded to BF16 in the bf16 activation mode; AVX-512 FMA
// for F32 W); otherwise OpenBLAS sgemm, BF16/F16 blocks of W widened first. In the bf16 activation
// mode every path other than the panel GEMM (which rounds as it packs) multiplies a rounded copy.
// Where the BF16 products run on the AVX-512 register tiles (AVX512_BF16 without AMX), a BF16 W is
// packed into their panels once, at load (runtime/packed_panels.hpp), and every product — decode's
// single rows included — multiplies the packed panels: no per-product packing, W streamed in order.
#include "runtime/linear_weight.hpp"

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "runtime/dot_rows.hpp"
#include "runtime/packed_panels.hpp"
#include "runtime/panel_gemm.hpp"

#include <algorithm>
#include <cblas.h>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

namespace optkit::runtime {

namespace {

using model::DType;

constexpr std::int64_t kBlasMinRows = 8;         // activation rows from which sgemm pays off
constexpr std::int64_t kWidenedBlasMinRows = 32; // the same when W must be widened first
constexpr std::int64_t kGemmBlockRows = 64;      // W rows per sgemm call (widened to fp32: 64 x K floats, L2-sized)
constexpr std::int64_t kDensePanelMinRows = 4;   // activation rows from which the AVX-512 panel GEMM pays off
constexpr std::int64_t kPanelChunk = 64;         // W rows a thread takes at a time (a whole panel)
constexpr std::int64_t kBroadcastChunk = 96;     // the same for f32_transposed (whole 12-row register tiles)
constexpr std::int64_t kDecodeShares = 8;        // decode: W rows per task = a thread's share / this

// The AVX-512 product for W's storage type, if there is one: BF16 with split activations (results
// within ~1e-5 of fp32, so prefill agrees with fp32 decode) or rounded ones (the bf16 mode), F32
// with FMA.
template <typename T>
std::optional<PanelProduct>
panel_product(ActivationPrecision activations) {
  if constexpr (std::is_same_v<T, Bf16>)
    return activations == ActivationPrecision::bf16 ? PanelProduct::bf16_rounded : PanelProduct::bf16_split;
  else if constexpr (std::is_same_v<T, float>)
    return PanelProduct::f32;
  else
    return std::nullopt;
}

// x[0, n) rounded to BF16 (nearest, ties to even) and widened back, in a buffer of the calling
// thread's that lives until its next call.
const float*
rounded_to_bf16(const float* x, std::int64_t n) {
  thread_local std::vector<float> rounded;
  rounded.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    rounded[static_cast<std::size_t>(i)] = model::bf16_to_float(model::float_to_bf16(x[i]));
  return rounded.data();
}

template <typename T> class DenseWeight final : public LinearWeight {
public:
  DenseWeight(const T* data, std::int64_t rows, std::int64_t cols, std::string format,
              ActivationPrecision activations = ActivationPrecision::fp32, WeightLayout layout = WeightLayout::in_place)
      : m_data(data)
      , m_rows(rows)
      , m_cols(cols)
      , m_format(std::move(format))
      , m_product(panel_product<T>(activations)) {
    if constexpr (std::is_same_v<T, Bf16>) {
      if (layout == WeightLayout::fastest && panel_packing_preferred(*m_product)) {
        m_packed = std::make_unique<PackedPanels>(data, rows, cols);
        m_data = nullptr; // the loader lets those bytes go
      }
    }
  }

  std::int64_t rows() const override { return m_rows; }
  std::int64_t cols() const override { return m_cols; }
  std::string format() const override { return m_format; }
  std::uint64_t storage_bytes() const override {
    return m_packed ? m_packed->bytes() : static_cast<std::uint64_t>(m_rows * m_cols) * sizeof(T);
  }
  bool reads_source() const override { return !m_packed; }

  void row(std::int64_t r, float* out) const override {
    if (m_packed) {
      m_packed->row(r, out);
      return;
    }
    const T* wr = m_data + r * m_cols;
    for (std::int64_t c = 0; c < m_cols; ++c)
      out[c] = to_float(wr[c]);
  }

  void multiply(const float* x, std::int64_t m, float* y, ThreadPool& pool) const override {
    if (m_packed) {
      multiply_packed(x, m, y, pool);
      return;
    }
    if constexpr (!std::is_same_v<T, F16>) {
      if (m >= kDensePanelMinRows && panel_gemm_supported(*m_product)) {
        const auto packed = pack_activations(x, m, m_cols, *m_product);
        pool.parallel_for(
            m_rows, [&](std::int64_t r0, std::int64_t r1) { panel_gemm_rows(m_data, r0, r1, packed, y, m_rows); },
            packed.kernel == PanelKernel::f32_transposed ? kBroadcastChunk : kPanelChunk);
        return;
      }
    }
    if (m_product == PanelProduct::bf16_rounded) // the bf16 activation mode, off the panel GEMM
      x = rounded_to_bf16(x, m * m_cols);
    if (m >= (std::is_same_v<T, float> ? kBlasMinRows : kWidenedBlasMinRows)) {
      multiply_blas(x, m, y, pool);
      return;
    }
    const std::int64_t chunk = std::max<std::int64_t>(16, m_rows / (8 * static_cast<std::int64_t>(pool.size())));
    pool.parallel_for(
        m_rows, [&](std::int64_t r0, std::int64_t r1) { dot_rows(m_data, m_cols, r0, r1, x, m, y, m_rows); }, chunk);
  }

private:
  // Prefill takes a panel at a time; decode (few rows, bound by streaming W) an eighth of a
  // thread's share of the panels at a time, so a thread slowed by something else takes fewer.
  // Decode in the fp32 activation mode multiplies fp32 activations (W widened in registers), as
  // the row-dots do; the split product's ~16 bits are for prefill, where the rate matters.
  void multiply_packed(const float* x, std::int64_t m, float* y, ThreadPool& pool) const {
    const bool decode = m < kDensePanelMinRows;
    const auto product = decode && m_product == PanelProduct::bf16_split ? PanelProduct::f32 : *m_product;
    const auto packed = pack_activations(x, m, m_cols, product, PanelKernel::avx512_packed);
    constexpr std::int64_t panel = PackedPanels::kPanelRows;
    const std::int64_t share = m_rows / (kDecodeShares * static_cast<std::int64_t>(pool.size())) / panel * panel;
    pool.parallel_for(
        m_rows, [&](std::int64_t r0, std::int64_t r1) { panel_gemm_rows(*m_packed, r0, r1, packed, y, m_rows); },
        decode ? std::max(panel, share) : panel);
  }

  // Each pool thread takes blocks of W's rows one at a time, widens a block to fp32 in its own buffer
  // when W is not fp32, and multiplies it with single-threaded sgemm into its columns of y.
  void multiply_blas(const float* x, std::int64_t m, float* y, ThreadPool& pool) const {
    if constexpr (std::is_same_v<T, float>)
      multiply_fp32_rows(m_data, m_rows, m_cols, x, m, y, pool);
    else
      multiply_widened(*this, x, m, y, pool);
  }

  const T* m_data;
  std::int64_t m_rows, m_cols;
  std::string m_format;
  std::optional<PanelProduct> m_product;  // the panel GEMM's product for this W (none for F16)
  std::unique_ptr<PackedPanels> m_packed; // a BF16 W packed at load, where panel_packing_preferred
};

// A weight computed in memory (calibration reconstructions, merged deltas), kept in fp32.
class OwnedDenseWeight final : public LinearWeight {
public:
  OwnedDenseWeight(std::vector<float> data, std::int64_t rows, std::int64_t cols)
      : m_data(std::move(data)), m_view(m_data.data(), rows, cols, "f32") {}
  std::int64_t rows() const override { return m_view.rows(); }
  std::int64_t cols() const override { return m_view.cols(); }
  std::string format() const override { return m_view.format(); }
  std::uint64_t storage_bytes() const override { return m_view.storage_bytes(); }
  void row(std::int64_t r, float* out) const override { m_view.row(r, out); }
  void multiply(const float* x, std::int64_t m, float* y, ThreadPool& pool) const override {
    m_view.multiply(x, m, y, pool);
  }

private:
  std::vector<float> m_data;
  DenseWeight<float> m_view;
};

void
use_single_threaded_blas() {
  // The runtime splits GEMMs across its own threads; OpenBLAS's threads would only compete.
  static std::once_flag single_threaded_blas;
  std::call_once(single_threaded_blas, [] { openblas_set_num_threads(1); });
}

} // namespace

void
multiply_fp32_rows(const float* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t m, float* y,
                   ThreadPool& pool) {
  const auto M = static_cast<blasint>(m), K = static_cast<blasint>(cols), N = static_cast<blasint>(rows);
  const std::int64_t blocks = (rows + kGemmBlockRows - 1) / kGemmBlockRows;
  pool.parallel_for(
      blocks,
      [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b) {
          const std::int64_t r0 = b * kGemmBlockRows, n = std::min(kGemmBlockRows, rows - r0);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<blasint>(n), K, 1.0f, x, K, w + r0 * cols,
                      K, 0.0f, y + r0, N);
        }
      },
      1);
}

void
multiply_widened(const LinearWeight& weight, const float* x, std::int64_t m, float* y, ThreadPool& pool) {
  const std::int64_t rows = weight.rows(), cols = weight.cols();
  const auto M = static_cast<blasint>(m), K = static_cast<blasint>(cols), N = static_cast<blasint>(rows);
  const std::int64_t blocks = (rows + kGemmBlockRows - 1) / kGemmBlockRows;
  pool.parallel_for(
      blocks,
      [&](std::int64_t b0, std::int64_t b1) {
        thread_local std::vector<float> widened; // reused across calls: no page faults per block
        for (std::int64_t b = b0; b < b1; ++b) {
          const std::int64_t r0 = b * kGemmBlockRows, n = std::min(kGemmBlockRows, rows - r0);
          widened.resize(static_cast<std::size_t>(n * cols));
          for (std::int64_t r = 0; r < n; ++r)
            weight.row(r0 + r, widened.data() + r * cols);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<blasint>(n), K, 1.0f, x, K,
                      widened.data(), K, 0.0f, y + r0, N);
        }
      },
      1);
}

std::unique_ptr<LinearWeight>
make_owned_dense_weight(std::vector<float> data, std::int64_t rows, std::int64_t cols) {
  use_single_threaded_blas();
  if (static_cast<std::int64_t>(data.size()) != rows * cols)
    throw InputError("owned dense weight: " + std::to_string(data.size()) + " values for " + std::to_string(rows) +
                     "x" + std::to_string(cols));
  return std::make_unique<OwnedDenseWeight>(std::move(data), rows, cols);
}

std::unique_ptr<LinearWeight>
make_dense_weight(DType dtype, std::span<const std::byte> bytes, std::int64_t rows, std::int64_t cols,
                  ActivationPrecision activations, WeightLayout layout) {
  use_single_threaded_blas();
  if (static_cast<std::uint64_t>(rows * cols) * model::dtype_size(dtype) != bytes.size())
    throw InputError("dense weight of " + std::to_string(rows) + "x" + std::to_string(cols) + " " +
                     std::string(model::dtype_name(dtype)) + " does not match its " + std::to_string(bytes.size()) +
                     " bytes");
  switch (dtype) {
  case DType::f32:
    return std::make_unique<DenseWeight<float>>(reinterpret_cast<const float*>(bytes.data()), rows, cols, "f32");
  case DType::bf16:
    return std::make_unique<DenseWeight<Bf16>>(reinterpret_cast<const Bf16*>(bytes.data()), rows, cols, "bf16",
                                               activations, layout);
  case DType::f16:
    return std::make_unique<DenseWeight<F16>>(reinterpret_cast<const F16*>(bytes.data()), rows, cols, "f16");
  default:
    throw InputError("a dense weight must be F32, BF16 or F16, not " + std::string(model::dtype_name(dtype)));
  }
}

std::vector<float>
dense_floats(const LinearWeight& w) {
  std::vector<float> out(static_cast<std::size_t>(w.rows() * w.cols()));
  for (std::int64_t r = 0; r < w.rows(); ++r)
    w.row(r, out.data() + r * w.cols());
  return out;
}

} // namespace optkit::runtime
