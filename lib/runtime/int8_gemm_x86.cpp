// AVX512_VNNI kernels of int8_gemm.hpp (x86-64 builds; chosen at run time by CPUID), and the
// activations' quantization on any x86-64 CPU.
//
// Register tiles of R W rows × MI activation rows, R·MI int32 accumulators: each 64-byte step
// along K loads R rows of W (masked past the end of the row, so a tail adds nothing) and MI rows
// of unsigned activations, and issues R·MI VPDPBUSD. One activation row (decode) takes 8 W rows
// at a time, streaming W once; more take 4 × 4, W's rows staying in L1 across activation rows.
#include "runtime/int8_gemm.hpp"
#include "runtime/x86_features.hpp"

#include <algorithm>
#include <cmath>
#include <immintrin.h>
#include <stdexcept>

namespace optkit::runtime {

namespace {

#define OPTKIT_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

constexpr std::int64_t kStep = 64; // bytes of K per VPDPBUSD

inline __mmask64
first64(std::int64_t n) {
  return n >= 64 ? ~__mmask64{0} : n <= 0 ? __mmask64{0} : (__mmask64{1} << n) - 1;
}

OPTKIT_VNNI float
absmax(const float* x, std::int64_t n) {
  __m512 m = _mm512_setzero_ps();
  for (std::int64_t c = 0; c < n; c += 16)
    m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps(first_lanes(n - c), x + c)));
  return _mm512_reduce_max_ps(m);
}

// u[c] = round-half-even(clamp(x[c] / scale, -128, 127)) + 128, as quant::quantize_value rounds
// (a true division, not a multiply by the reciprocal, so the grid is the same bit for bit).
OPTKIT_VNNI void
quantize_row(const float* x, std::int64_t cols, float scale, std::uint8_t* u, std::int64_t pitch) {
  const __m512 s = _mm512_set1_ps(scale), lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
  const __m512i offset = _mm512_set1_epi32(128);
  for (std::int64_t c = 0; c < pitch; c += 16) {
    __m512i q = _mm512_setzero_si512();
    if (scale > 0.0f) {
      const __m512 v = _mm512_maskz_loadu_ps(first_lanes(cols - c), x + c);
      const __m512 scaled = _mm512_min_ps(_mm512_max_ps(_mm512_div_ps(v, s), lo), hi);
      q = _mm512_cvtps_epi32(_mm512_roundscale_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(u + c), _mm512_cvtepi32_epi8(_mm512_add_epi32(q, offset)));
  }
}

// The same two on any CPU (the AVX2 Δ kernel's activations), lane for lane: VMAXPS and VMINPS
// return their second operand when either is NaN, and nearbyint rounds half to even.
float
absmax_scalar(const float* x, std::int64_t n) {
  float m = 0.0f;
  for (std::int64_t c = 0; c < n; ++c) {
    const float a = std::fabs(x[c]);
    m = m > a ? m : a;
  }
  return m;
}

void
quantize_row_scalar(const float* x, std::int64_t cols, float scale, std::uint8_t* u, std::int64_t pitch) {
  for (std::int64_t c = 0; c < pitch; ++c) {
    int q = 0;
    if (scale > 0.0f && c < cols) {
      const float v = x[c] / scale, low = v > -128.0f ? v : -128.0f, clamped = low < 127.0f ? low : 127.0f;
      q = static_cast<int>(std::nearbyint(clamped));
    }
    u[c] = static_cast<std::uint8_t>(q + 128);
  }
}

OPTKIT_VNNI std::int32_t
row_sum(const std::int8_t* w, std::int64_t cols) {
  __m512i acc = _mm512_setzero_si512();
  const __m512i ones = _mm512_set1_epi8(1);
  for (std::int64_t c = 0; c < cols; c += kStep)
    acc = _mm512_dpbusd_epi32(acc, ones, _mm512_maskz_loadu_epi8(first64(cols - c), w + c));
  return _mm512_reduce_add_epi32(acc);
}

// sums[i][k] = Σ_c u[i0 + i, c] · w[r + k, c] for k < R, i < MI.
template <std::size_t R, std::size_t MI>
OPTKIT_VNNI void
tile(const std::int8_t* w, std::int64_t cols, std::int64_t r, const QuantizedActivations& x, std::int64_t i0,
     std::int32_t (&sums)[MI][R]) {
  __m512i acc[MI][R];
  for (auto& row : acc)
    for (auto& a : row)
      a = _mm512_setzero_si512();
  const std::uint8_t* u = x.u.data() + i0 * x.pitch;
  const std::int8_t* w0 = w + r * cols;
  for (std::int64_t c = 0; c < cols; c += kStep) {
    const __mmask64 mask = first64(cols - c);
    __m512i wv[R];
    for (std::size_t k = 0; k < R; ++k)
      wv[k] = _mm512_maskz_loadu_epi8(mask, w0 + static_cast<std::int64_t>(k) * cols + c);
    for (std::size_t i = 0; i < MI; ++i) {
      const __m512i uv = _mm512_loadu_si512(u + static_cast<std::int64_t>(i) * x.pitch + c);
      for (std::size_t k = 0; k < R; ++k)
        acc[i][k] = _mm512_dpbusd_epi32(acc[i][k], uv, wv[k]);
    }
  }
  for (std::size_t i = 0; i < MI; ++i)
    for (std::size_t k = 0; k < R; ++k)
      sums[i][k] = _mm512_reduce_add_epi32(acc[i][k]);
}

template <std::size_t R, std::size_t MI>
void
tile_to_y(const std::int8_t* w, std::int64_t cols, std::int64_t r, std::span<const std::int32_t> offsets,
          std::span<const float> w_scales, const QuantizedActivations& x, std::int64_t i0, float* y, std::int64_t ldy) {
  std::int32_t sums[MI][R];
  tile<R, MI>(w, cols, r, x, i0, sums);
  for (std::size_t i = 0; i < MI; ++i) {
    const std::int64_t row_x = i0 + static_cast<std::int64_t>(i);
    for (std::size_t k = 0; k < R; ++k) {
      const std::int64_t row_w = r + static_cast<std::int64_t>(k);
      const auto at = static_cast<std::size_t>(row_w);
      y[row_x * ldy + row_w] =
          x.scale[static_cast<std::size_t>(row_x)] * w_scales[at] * static_cast<float>(sums[i][k] - offsets[at]);
    }
  }
}

// Activation rows [0, m) against W rows [r, r + R), 4 activation rows at a time.
template <std::size_t R>
void
rows_to_y(const std::int8_t* w, std::int64_t cols, std::int64_t r, std::span<const std::int32_t> offsets,
          std::span<const float> w_scales, const QuantizedActivations& x, float* y, std::int64_t ldy) {
  std::int64_t i0 = 0;
  for (; i0 + 4 <= x.m; i0 += 4)
    tile_to_y<R, 4>(w, cols, r, offsets, w_scales, x, i0, y, ldy);
  switch (x.m - i0) {
  case 3:
    tile_to_y<R, 3>(w, cols, r, offsets, w_scales, x, i0, y, ldy);
    break;
  case 2:
    tile_to_y<R, 2>(w, cols, r, offsets, w_scales, x, i0, y, ldy);
    break;
  case 1:
    tile_to_y<R, 1>(w, cols, r, offsets, w_scales, x, i0, y, ldy);
    break;
  default:
    break;
  }
}

} // namespace

bool
int8_gemm_supported() {
  static const bool has = cpu_has_avx512() && __builtin_cpu_supports("avx512vnni");
  return has;
}

QuantizedActivations
quantize_activations_u8(const float* x, std::int64_t m, std::int64_t cols, bool per_tensor) {
  const bool wide = int8_gemm_supported();
  const auto row_max = wide ? absmax : absmax_scalar;
  const auto quantize = wide ? quantize_row : quantize_row_scalar;
  QuantizedActivations out;
  out.m = m;
  out.cols = cols;
  out.pitch = (cols + kStep - 1) / kStep * kStep;
  out.u.resize(static_cast<std::size_t>(m * out.pitch));
  out.scale.resize(static_cast<std::size_t>(m));
  float tensor_max = 0.0f;
  if (per_tensor)
    for (std::int64_t i = 0; i < m; ++i)
      tensor_max = std::max(tensor_max, row_max(x + i * cols, cols));
  for (std::int64_t i = 0; i < m; ++i) {
    const float top = per_tensor ? tensor_max : row_max(x + i * cols, cols);
    const float scale = top > 0.0f ? top / 127.0f : 0.0f;
    out.scale[static_cast<std::size_t>(i)] = scale;
    quantize(x + i * cols, cols, scale, out.u.data() + i * out.pitch, out.pitch);
  }
  return out;
}

std::vector<std::int32_t>
int8_row_offsets(const std::int8_t* w, std::int64_t rows, std::int64_t cols) {
  if (!int8_gemm_supported())
    throw std::logic_error("int8_row_offsets: this CPU lacks AVX512_VNNI; check int8_gemm_supported() first");
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r)
    offsets[static_cast<std::size_t>(r)] = 128 * row_sum(w + r * cols, cols);
  return offsets;
}

void
int8_gemm_rows(const std::int8_t* w, std::int64_t cols, std::int64_t r0, std::int64_t r1,
               std::span<const std::int32_t> row_offsets, std::span<const float> w_scales,
               const QuantizedActivations& x, float* y, std::int64_t ldy) {
  if (x.cols != cols)
    throw std::logic_error("int8_gemm_rows: activations and W differ in columns");
  std::int64_t r = r0;
  if (x.m == 1) { // decode: W streams from memory, 8 rows side by side
    for (; r + 8 <= r1; r += 8)
      tile_to_y<8, 1>(w, cols, r, row_offsets, w_scales, x, 0, y, ldy);
  } else {
    for (; r + 4 <= r1; r += 4)
      rows_to_y<4>(w, cols, r, row_offsets, w_scales, x, y, ldy);
  }
  for (; r < r1; ++r)
    rows_to_y<1>(w, cols, r, row_offsets, w_scales, x, y, ldy);
}

} // namespace optkit::runtime
