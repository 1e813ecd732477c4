#include "quant/ggml_blocks.hpp"

#include "model/dtype.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace optkit::quant {

namespace {

constexpr std::int64_t kSuperBlock = 256; // values of a k-quant super-block
constexpr std::int64_t kBlock32 = 32;     // values of a Q8_0 / Q5_0 / Q5_1 block
constexpr float kGroupMaxEps = 1e-15f;    // a group whose largest |x| is below this is all zero

// Round half to even, as ggml's nearest_int does.
int
nearest_int(float v) {
  return static_cast<int>(std::nearbyint(v));
}

void
put_f16(std::uint8_t* p, float v) {
  const std::uint16_t bits = model::float_to_f16(v);
  p[0] = static_cast<std::uint8_t>(bits & 0xff);
  p[1] = static_cast<std::uint8_t>(bits >> 8);
}

float
get_f16(const std::uint8_t* p) {
  return model::f16_to_float(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

// The symmetric fit of ggml's make_qx_quants (rmse_type 1): levels l ∈ [−nmax, nmax) with
// x ≈ scale·l, the scale chosen among 19 candidate grids by the weighted least squares of its
// levels (weights: `weights`, or x² without them). levels[i] receives l + nmax.
float
symmetric_fit(const float* x, int n, int nmax, const float* weights, std::int8_t* levels) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax < kGroupMaxEps) {
    std::fill(levels, levels + n, std::int8_t{0});
    return 0.0f;
  }
  auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  auto weight = [&](int i) { return weights ? weights[i] : x[i] * x[i]; };
  float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale, i);
    levels[i] = static_cast<std::int8_t>(l + nmax);
    sumlx += weight(i) * x[i] * static_cast<float>(l);
    suml2 += weight(i) * static_cast<float>(l) * static_cast<float>(l); // (w·l)·l, as ggml rounds it
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0)
      continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      sumlx += weight(i) * x[i] * static_cast<float>(l);
      suml2 += weight(i) * static_cast<float>(l) * static_cast<float>(l); // (w·l)·l, as ggml rounds it
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        levels[i] = static_cast<std::int8_t>(level(iscale, i) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// The asymmetric fit of ggml's make_qkx2_quants / make_qkx3_quants: levels l ∈ [0, nmax] with
// x ≈ scale·l − offset (offset ≥ 0: the group's minimum, clamped to at most 0), the grid chosen
// among nstep + 1 candidates (nmax + rmin + rdelta·k over the range) by the closed-form weighted
// least-squares (scale, min) of each candidate's levels. Returns the scale; *offset the offset.
float
asymmetric_fit(const float* x, int n, int nmax, const float* weights, std::uint8_t* levels, float* offset, float rmin,
               float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  min = std::min(min, 0.0f);
  if (max <= min) {
    std::fill(levels, levels + n, std::uint8_t{0});
    *offset = -min;
    return 0.0f;
  }
  auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax); };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<std::uint8_t>(level(iscale, i));
    const float diff = scale * levels[i] + min - x[i];
    best_error += weights[i] * (diff * diff); // w·(diff²), as ggml rounds it
  }
  std::array<std::uint8_t, kSuperBlock> candidate{};
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      candidate[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(l);
      const auto lf = static_cast<float>(l);
      sum_l += weights[i] * lf;
      sum_l2 += weights[i] * lf * lf;
      sum_xl += weights[i] * lf * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0)
      continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * candidate[static_cast<std::size_t>(i)] + this_min - x[i];
      error += weights[i] * (diff * diff); // w·(diff²), as ggml rounds it
    }
    if (error < best_error) {
      std::copy(candidate.begin(), candidate.begin() + n, levels);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *offset = -min;
  return scale;
}

// ggml's make_qp_quants: non-negative values x quantized to [0, nmax] under one scale, the scale
// searched over 9 grids, then refined by at most 5 passes of coordinate descent, all weighted by
// `weights`. Returns the scale.
float
positive_fit(const float* x, int n, int nmax, const float* weights, std::uint8_t* levels) {
  float max = 0;
  for (int i = 0; i < n; ++i)
    max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    std::fill(levels, levels + n, std::uint8_t{0});
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / max;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - (1 / iscale) * static_cast<float>(nearest_int(iscale * x[i]));
    best_mse += weights[i] * diff * diff;
  }
  for (int step = -4; step <= 4; ++step) {
    if (step == 0)
      continue;
    const float candidate = (0.1f * static_cast<float>(step) + static_cast<float>(nmax)) / max;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = x[i] - (1 / candidate) * static_cast<float>(std::min(nmax, nearest_int(candidate * x[i])));
      mse += weights[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = candidate;
    }
  }
  float sumlx = 0, suml2 = 0;
  std::array<int, 16> l{};
  for (int i = 0; i < n; ++i) {
    l[static_cast<std::size_t>(i)] = std::min(nmax, nearest_int(iscale * x[i]));
    const auto li = static_cast<float>(l[static_cast<std::size_t>(i)]);
    sumlx += weights[i] * x[i] * li;
    suml2 += weights[i] * li * li;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      auto& li = l[static_cast<std::size_t>(i)];
      const float w = weights[i];
      float slx = sumlx - w * x[i] * static_cast<float>(li);
      float sl2 = suml2 - w * static_cast<float>(li) * static_cast<float>(li); // (w·l)·l, as ggml rounds it
      if (slx <= 0 || sl2 <= 0)
        continue;
      // Clamped before the conversion: a tiny slx makes the ratio too large for an int.
      const int next = nearest_int(std::min(static_cast<float>(nmax), x[i] * sl2 / slx));
      if (next == li)
        continue;
      slx += w * x[i] * static_cast<float>(next);
      sl2 += w * static_cast<float>(next) * static_cast<float>(next);
      if (slx * slx * suml2 > sumlx * sumlx * sl2) {
        li = next;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0)
      break;
  }
  for (int i = 0; i < n; ++i)
    levels[i] = static_cast<std::uint8_t>(l[static_cast<std::size_t>(i)]);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

// ---- Q8_0: d (fp16), 32 × int8 ----

void
quantize_q8_0(const float* x, std::uint8_t* out) {
  float amax = 0;
  for (int i = 0; i < kBlock32; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127;
  const float id = d != 0 ? 1 / d : 0.0f;
  put_f16(out, d);
  for (int i = 0; i < kBlock32; ++i)
    out[2 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::round(x[i] * id)));
}

void
dequantize_q8_0(const std::uint8_t* in, float* y) {
  const float d = get_f16(in);
  for (int i = 0; i < kBlock32; ++i)
    y[i] = d * static_cast<float>(static_cast<std::int8_t>(in[2 + i]));
}

// ---- Q5_0 / Q5_1: d (, m) fp16, qh (32 high bits), 16 bytes of low nibbles ----

// Value j of a 32-value block: low nibble of byte j (j < 16) or the high nibble of byte j − 16;
// the fifth bit is bit j of qh.
void
pack_5bit_block(const std::uint8_t* levels, std::uint8_t* qh_out, std::uint8_t* qs) {
  std::uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<std::uint8_t>((levels[j] & 0x0f) | ((levels[j + 16] & 0x0f) << 4));
    qh |= static_cast<std::uint32_t>((levels[j] >> 4) & 1) << j;
    qh |= static_cast<std::uint32_t>((levels[j + 16] >> 4) & 1) << (j + 16);
  }
  for (int b = 0; b < 4; ++b)
    qh_out[b] = static_cast<std::uint8_t>(qh >> (8 * b));
}

int
unpack_5bit(const std::uint8_t* qh_bytes, const std::uint8_t* qs, int j) {
  const std::uint32_t qh = static_cast<std::uint32_t>(qh_bytes[0]) | static_cast<std::uint32_t>(qh_bytes[1]) << 8 |
                           static_cast<std::uint32_t>(qh_bytes[2]) << 16 |
                           static_cast<std::uint32_t>(qh_bytes[3]) << 24;
  const int nibble = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
  return nibble | static_cast<int>(((qh >> j) & 1) << 4);
}

// sigma² of a row as Q5_0 / Q5_1 weight their importance: the row's mean square.
float
row_mean_square(std::span<const float> x) {
  float sum = 0;
  for (const float v : x)
    sum += v * v;
  return sum / static_cast<float>(x.size());
}

void
quantize_q5_0(const float* x, const float* importance, float sigma2, std::uint8_t* out) {
  std::array<std::uint8_t, kBlock32> levels{};
  if (importance) {
    std::array<float, kBlock32> weights{};
    for (int i = 0; i < kBlock32; ++i)
      weights[static_cast<std::size_t>(i)] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
    std::array<std::int8_t, kBlock32> signed_levels{};
    put_f16(out, symmetric_fit(x, kBlock32, 16, weights.data(), signed_levels.data()));
    for (int i = 0; i < kBlock32; ++i)
      levels[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(signed_levels[static_cast<std::size_t>(i)]);
  } else {
    float amax = 0, max = 0;
    for (int i = 0; i < kBlock32; ++i)
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    const float d = max / -16;
    const float id = d != 0 ? 1 / d : 0.0f;
    put_f16(out, d);
    for (int i = 0; i < kBlock32; ++i)
      levels[static_cast<std::size_t>(i)] =
          static_cast<std::uint8_t>(std::min(31, static_cast<int>(static_cast<std::int8_t>(x[i] * id + 16.5f))));
  }
  pack_5bit_block(levels.data(), out + 2, out + 6);
}

void
dequantize_q5_0(const std::uint8_t* in, float* y) {
  const float d = get_f16(in);
  for (int j = 0; j < kBlock32; ++j)
    y[j] = d * static_cast<float>(unpack_5bit(in + 2, in + 6, j) - 16);
}

void
quantize_q5_1(const float* x, const float* importance, float sigma2, std::uint8_t* out) {
  std::array<std::uint8_t, kBlock32> levels{};
  if (importance) {
    std::array<float, kBlock32> weights{};
    for (int i = 0; i < kBlock32; ++i)
      weights[static_cast<std::size_t>(i)] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
    float offset = 0;
    const float d = asymmetric_fit(x, kBlock32, 31, weights.data(), levels.data(), &offset, -0.9f, 0.05f, 36);
    put_f16(out, d);
    put_f16(out + 2, -offset);
  } else {
    float min = x[0], max = x[0];
    for (int i = 1; i < kBlock32; ++i) {
      min = std::min(min, x[i]);
      max = std::max(max, x[i]);
    }
    const float d = (max - min) / 31;
    const float id = d != 0 ? 1 / d : 0.0f;
    put_f16(out, d);
    put_f16(out + 2, min);
    for (int i = 0; i < kBlock32; ++i)
      levels[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>((x[i] - min) * id + 0.5f);
  }
  pack_5bit_block(levels.data(), out + 4, out + 8);
}

void
dequantize_q5_1(const std::uint8_t* in, float* y) {
  const float d = get_f16(in), m = get_f16(in + 2);
  for (int j = 0; j < kBlock32; ++j)
    y[j] = d * static_cast<float>(unpack_5bit(in + 4, in + 8, j)) + m;
}

// ---- Q4_K / Q5_K: d, dmin (fp16), 12 bytes of 6-bit sub-scales and mins, (qh,) qs ----

// Sub-block j's 6-bit scale and min in the 12-byte packing (ggml's get_scale_min_k4).
std::pair<int, int>
scale_min_k4(int j, const std::uint8_t* s) {
  if (j < 4)
    return {s[j] & 63, s[j + 4] & 63};
  return {(s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)};
}

void
pack_scale_min_k4(const std::uint8_t* scales, const std::uint8_t* mins, std::uint8_t* s) {
  std::fill(s, s + 12, std::uint8_t{0});
  for (int j = 0; j < 8; ++j) {
    const std::uint8_t ls = scales[j], lm = mins[j];
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
    } else {
      s[j + 4] = static_cast<std::uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
      s[j - 4] |= static_cast<std::uint8_t>((ls >> 4) << 6);
      s[j] |= static_cast<std::uint8_t>((lm >> 4) << 6);
    }
  }
}

// A 256-value super-block of Q4_K (nmax 15) or Q5_K (nmax 31): each 32-value sub-block's scale
// and min fitted, the 8 of each quantized to 6 bits under fp16 d and dmin, then every value
// re-rounded against the decoded scales. Writes d, dmin and the packed scales to `head` (16
// bytes) and the levels to `levels`.
void
fit_k_superblock(const float* x, const float* importance, int nmax, std::uint8_t* head, std::uint8_t* levels) {
  std::array<float, 8> scales{}, mins{}, weight_sums{};
  std::array<float, kBlock32> weights{};
  float sigma2 = 0;
  for (int i = 0; i < kSuperBlock; ++i)
    sigma2 += x[i] * x[i];
  sigma2 = 2 * sigma2 / kSuperBlock;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + kBlock32 * j;
    if (importance) {
      for (int l = 0; l < kBlock32; ++l)
        weights[static_cast<std::size_t>(l)] = importance[kBlock32 * j + l] * std::sqrt(sigma2 + xs[l] * xs[l]);
    } else {
      float sum_x2 = 0;
      for (int l = 0; l < kBlock32; ++l)
        sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / kBlock32);
      for (int l = 0; l < kBlock32; ++l)
        weights[static_cast<std::size_t>(l)] = av_x + std::fabs(xs[l]);
    }
    for (const float w : weights)
      weight_sums[static_cast<std::size_t>(j)] += w;
    const bool four_bit = nmax == 15;
    scales[static_cast<std::size_t>(j)] =
        importance
            ? asymmetric_fit(xs, kBlock32, nmax, weights.data(), levels + kBlock32 * j,
                             &mins[static_cast<std::size_t>(j)], -0.9f, 0.05f, 36)
            : asymmetric_fit(xs, kBlock32, nmax, weights.data(), levels + kBlock32 * j,
                             &mins[static_cast<std::size_t>(j)], four_bit ? -1.0f : -0.5f, 0.1f, four_bit ? 20 : 15);
  }
  std::array<std::uint8_t, 8> scale_levels{}, min_levels{};
  float d = 0, dmin = 0;
  if (importance) {
    d = positive_fit(scales.data(), 8, 63, weight_sums.data(), scale_levels.data());
    dmin = positive_fit(mins.data(), 8, 63, weight_sums.data(), min_levels.data());
  } else {
    const float max_scale = *std::max_element(scales.begin(), scales.end());
    const float max_min = std::max(0.0f, *std::max_element(mins.begin(), mins.end()));
    const float inv_scale = max_scale > 0 ? 63 / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63 / max_min : 0.0f;
    for (std::size_t j = 0; j < 8; ++j) {
      scale_levels[j] = static_cast<std::uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
      min_levels[j] = static_cast<std::uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
    }
    d = std::max(0.0f, max_scale) / 63;
    dmin = max_min / 63;
  }
  put_f16(head, d);
  put_f16(head + 2, dmin);
  pack_scale_min_k4(scale_levels.data(), min_levels.data(), head + 4);
  const float dq = get_f16(head), dminq = get_f16(head + 2);
  for (int j = 0; j < 8; ++j) {
    const auto [sc, m] = scale_min_k4(j, head + 4);
    const float sub_d = dq * static_cast<float>(sc);
    if (sub_d == 0)
      continue;
    const float sub_m = dminq * static_cast<float>(m);
    for (int l = 0; l < kBlock32; ++l)
      levels[kBlock32 * j + l] =
          static_cast<std::uint8_t>(std::clamp(nearest_int((x[kBlock32 * j + l] + sub_m) / sub_d), 0, nmax));
  }
}

void
quantize_q4_k(const float* x, const float* importance, std::uint8_t* out) {
  std::array<std::uint8_t, kSuperBlock> levels{};
  fit_k_superblock(x, importance, 15, out, levels.data());
  std::uint8_t* qs = out + 16;
  for (int chunk = 0; chunk < 4; ++chunk)
    for (int l = 0; l < 32; ++l)
      qs[32 * chunk + l] = static_cast<std::uint8_t>(levels[static_cast<std::size_t>(64 * chunk + l)] |
                                                     (levels[static_cast<std::size_t>(64 * chunk + 32 + l)] << 4));
}

void
dequantize_q4_k(const std::uint8_t* in, float* y) {
  const float d = get_f16(in), dmin = get_f16(in + 2);
  const std::uint8_t* qs = in + 16;
  for (int chunk = 0; chunk < 4; ++chunk) {
    const auto [sc1, m1] = scale_min_k4(2 * chunk, in + 4);
    const auto [sc2, m2] = scale_min_k4(2 * chunk + 1, in + 4);
    for (int l = 0; l < 32; ++l) {
      y[64 * chunk + l] =
          d * static_cast<float>(sc1) * static_cast<float>(qs[32 * chunk + l] & 0x0f) - dmin * static_cast<float>(m1);
      y[64 * chunk + 32 + l] =
          d * static_cast<float>(sc2) * static_cast<float>(qs[32 * chunk + l] >> 4) - dmin * static_cast<float>(m2);
    }
  }
}

void
quantize_q5_k(const float* x, const float* importance, std::uint8_t* out) {
  std::array<std::uint8_t, kSuperBlock> levels{};
  fit_k_superblock(x, importance, 31, out, levels.data());
  std::uint8_t* qh = out + 16;
  std::uint8_t* qs = out + 48;
  std::fill(qh, qh + 32, std::uint8_t{0});
  for (int chunk = 0; chunk < 4; ++chunk)
    for (int l = 0; l < 32; ++l) {
      const int low = levels[static_cast<std::size_t>(64 * chunk + l)];
      const int high = levels[static_cast<std::size_t>(64 * chunk + 32 + l)];
      qh[l] |= static_cast<std::uint8_t>(((low >> 4) & 1) << (2 * chunk));
      qh[l] |= static_cast<std::uint8_t>(((high >> 4) & 1) << (2 * chunk + 1));
      qs[32 * chunk + l] = static_cast<std::uint8_t>((low & 0x0f) | ((high & 0x0f) << 4));
    }
}

void
dequantize_q5_k(const std::uint8_t* in, float* y) {
  const float d = get_f16(in), dmin = get_f16(in + 2);
  const std::uint8_t* qh = in + 16;
  const std::uint8_t* qs = in + 48;
  for (int chunk = 0; chunk < 4; ++chunk) {
    const auto [sc1, m1] = scale_min_k4(2 * chunk, in + 4);
    const auto [sc2, m2] = scale_min_k4(2 * chunk + 1, in + 4);
    for (int l = 0; l < 32; ++l) {
      const int low = (qs[32 * chunk + l] & 0x0f) | (((qh[l] >> (2 * chunk)) & 1) << 4);
      const int high = (qs[32 * chunk + l] >> 4) | (((qh[l] >> (2 * chunk + 1)) & 1) << 4);
      y[64 * chunk + l] = d * static_cast<float>(sc1) * static_cast<float>(low) - dmin * static_cast<float>(m1);
      y[64 * chunk + 32 + l] = d * static_cast<float>(sc2) * static_cast<float>(high) - dmin * static_cast<float>(m2);
    }
  }
}

// ---- Q6_K: ql[128] (low nibbles), qh[64] (high 2 bits), 16 int8 sub-scales, d (fp16) last ----

void
quantize_q6_k(const float* x, const float* importance, std::uint8_t* out) {
  std::array<std::int8_t, kSuperBlock> levels{};
  std::array<float, 16> scales{};
  float max_scale = 0, max_abs_scale = 0;
  for (int b = 0; b < 16; ++b) {
    const float scale =
        symmetric_fit(x + 16 * b, 16, 32, importance ? importance + 16 * b : nullptr, levels.data() + 16 * b);
    scales[static_cast<std::size_t>(b)] = scale;
    if (std::fabs(scale) > max_abs_scale) {
      max_abs_scale = std::fabs(scale);
      max_scale = scale;
    }
  }
  std::fill(out, out + 210, std::uint8_t{0});
  if (max_abs_scale < kGroupMaxEps)
    return; // an all-zero block: d = 0
  const float iscale = -128.0f / max_scale;
  put_f16(out + 208, 1 / iscale);
  auto* sub_scales = reinterpret_cast<std::int8_t*>(out + 192);
  for (std::size_t b = 0; b < 16; ++b)
    sub_scales[b] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[b])));
  const float d = get_f16(out + 208);
  for (int b = 0; b < 16; ++b) {
    const float sub_d = d * static_cast<float>(sub_scales[b]);
    if (sub_d == 0)
      continue;
    for (int i = 0; i < 16; ++i)
      levels[static_cast<std::size_t>(16 * b + i)] =
          static_cast<std::int8_t>(std::clamp(nearest_int(x[16 * b + i] / sub_d), -32, 31) + 32);
  }
  std::uint8_t* ql = out;
  std::uint8_t* qh = out + 128;
  for (int half = 0; half < 2; ++half) {
    const std::int8_t* l = levels.data() + 128 * half;
    for (int i = 0; i < 32; ++i) {
      ql[64 * half + i] = static_cast<std::uint8_t>((l[i] & 0x0f) | ((l[i + 64] & 0x0f) << 4));
      ql[64 * half + 32 + i] = static_cast<std::uint8_t>((l[i + 32] & 0x0f) | ((l[i + 96] & 0x0f) << 4));
      qh[32 * half + i] = static_cast<std::uint8_t>((l[i] >> 4) | ((l[i + 32] >> 4) << 2) | ((l[i + 64] >> 4) << 4) |
                                                    ((l[i + 96] >> 4) << 6));
    }
  }
}

void
dequantize_q6_k(const std::uint8_t* in, float* y) {
  const float d = get_f16(in + 208);
  const auto* sub_scales = reinterpret_cast<const std::int8_t*>(in + 192);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* ql = in + 64 * half;
    const std::uint8_t* qh = in + 128 + 32 * half;
    const std::int8_t* sc = sub_scales + 8 * half;
    float* out = y + 128 * half;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

// llama.cpp's Q8_K activations (quantize_row_q8_K_ref): per 256 values, q = round(−127 / max · x)
// (max: the value of largest magnitude, signed), at most 127, times its reciprocal.
void
round_q8_k(float* x) {
  float max = 0, amax = 0;
  for (int i = 0; i < kSuperBlock; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax == 0)
    return;
  const float iscale = -127.0f / max, d = 1 / iscale;
  for (int i = 0; i < kSuperBlock; ++i)
    x[i] = static_cast<float>(std::min(127, nearest_int(iscale * x[i]))) * d;
}

// llama.cpp's Q8_0 / Q8_1 activations as its x86 kernels make them: per 32 values, d = amax / 127
// stored as fp16, q = round-half-even(x · 127 / amax).
void
round_q8_0(float* x) {
  float amax = 0;
  for (int i = 0; i < kBlock32; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  const float d = model::f16_to_float(model::float_to_f16(amax / 127));
  const float id = amax != 0 ? 127 / amax : 0.0f;
  for (int i = 0; i < kBlock32; ++i)
    x[i] = std::nearbyint(x[i] * id) * d;
}

} // namespace

using model::ggml_block_bytes;
using model::ggml_block_values;
using model::ggml_type_name;

void
quantize_row(GgmlType type, std::span<const float> x, std::span<const float> importance, std::byte* out) {
  const auto n = static_cast<std::int64_t>(x.size());
  const std::int64_t block = ggml_block_values(type);
  if (n % block != 0)
    throw std::logic_error(
        fmt::format("quantize_row {}: {} values is not a whole number of blocks", ggml_type_name(type), n));
  if (!importance.empty() && importance.size() != x.size())
    throw std::logic_error("quantize_row: the importance vector is not one value per column");
  auto* bytes = reinterpret_cast<std::uint8_t*>(out);
  if (type == GgmlType::f32) {
    std::memcpy(out, x.data(), x.size_bytes());
    return;
  }
  if (type == GgmlType::f16 || type == GgmlType::bf16) {
    const auto encoded = model::encode_floats(x, type == GgmlType::f16 ? model::DType::f16 : model::DType::bf16);
    std::memcpy(out, encoded.data(), encoded.size());
    return;
  }
  const float* weights = importance.empty() ? nullptr : importance.data();
  const float sigma2 = row_mean_square(x);
  const std::int64_t block_bytes = ggml_block_bytes(type);
  for (std::int64_t b = 0; b < n / block; ++b) {
    const float* xb = x.data() + b * block;
    const float* wb = weights ? weights + b * block : nullptr;
    std::uint8_t* ob = bytes + b * block_bytes;
    switch (type) {
    case GgmlType::q8_0:
      quantize_q8_0(xb, ob);
      break;
    case GgmlType::q5_0:
      quantize_q5_0(xb, wb, sigma2, ob);
      break;
    case GgmlType::q5_1:
      quantize_q5_1(xb, wb, sigma2, ob);
      break;
    case GgmlType::q4_k:
      quantize_q4_k(xb, wb, ob);
      break;
    case GgmlType::q5_k:
      quantize_q5_k(xb, wb, ob);
      break;
    case GgmlType::q6_k:
      quantize_q6_k(xb, wb, ob);
      break;
    default:
      throw std::logic_error("quantize_row: unhandled type");
    }
  }
}

void
round_dot_product_input(GgmlType weight, std::span<float> x) {
  switch (weight) {
  case GgmlType::f32:
    return;
  case GgmlType::f16:
    for (auto& v : x)
      v = model::f16_to_float(model::float_to_f16(v));
    return;
  case GgmlType::bf16:
    for (auto& v : x)
      v = model::bf16_to_float(model::float_to_bf16(v));
    return;
  case GgmlType::q8_0:
  case GgmlType::q5_0:
  case GgmlType::q5_1:
    for (std::size_t b = 0; b + kBlock32 <= x.size(); b += kBlock32)
      round_q8_0(x.data() + b);
    return;
  case GgmlType::q4_k:
  case GgmlType::q5_k:
  case GgmlType::q6_k:
    for (std::size_t b = 0; b + kSuperBlock <= x.size(); b += kSuperBlock)
      round_q8_k(x.data() + b);
    return;
  }
}

void
dequantize_row(GgmlType type, const std::byte* row, std::int64_t count, float* out) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(row);
  switch (type) {
  case GgmlType::f32:
    std::memcpy(out, row, static_cast<std::size_t>(count) * sizeof(float));
    return;
  case GgmlType::f16:
    for (std::int64_t i = 0; i < count; ++i)
      out[i] = get_f16(bytes + 2 * i);
    return;
  case GgmlType::bf16:
    for (std::int64_t i = 0; i < count; ++i)
      out[i] = model::bf16_to_float(static_cast<std::uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8)));
    return;
  default:
    break;
  }
  const std::int64_t block = ggml_block_values(type), block_bytes = ggml_block_bytes(type);
  for (std::int64_t b = 0; b < count / block; ++b) {
    const std::uint8_t* in = bytes + b * block_bytes;
    float* y = out + b * block;
    switch (type) {
    case GgmlType::q8_0:
      dequantize_q8_0(in, y);
      break;
    case GgmlType::q5_0:
      dequantize_q5_0(in, y);
      break;
    case GgmlType::q5_1:
      dequantize_q5_1(in, y);
      break;
    case GgmlType::q4_k:
      dequantize_q4_k(in, y);
      break;
    case GgmlType::q5_k:
      dequantize_q5_k(in, y);
      break;
    case GgmlType::q6_k:
      dequantize_q6_k(in, y);
      break;
    default:
      throw std::logic_error("dequantize_row: unhandled type");
    }
  }
}

} // namespace optkit::quant
