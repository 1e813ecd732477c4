// The whole decoder step on a CUDA device at Llama-3.1-8B's shape (cuda/device_decoder.cuh), random
// BF16 weights, side by side in one run:
//   attention  paged attention over a block table (the engine's) against the contiguous decode
//              kernel (cuda/decode_attention.cu, what plan profile times) at batch × context,
//              with the cache bytes read per second and the share of the device's peak bandwidth
//   step       a decode step of 16 sequences at 1024 positions: all rows on the base, then the rows
//              spread over 1, 2 and 8 variants whose every matrix carries a random 2:4 4-bit Δ
//              (group 128), applied by SBMM; host wall time per step, embeddings up and logits
//              down included
// Usage: perf_decoder_cuda [device, default 0] [context, default 1024]
#include "cuda/decode_attention.cuh"
#include "cuda/device_array.cuh"
#include "cuda/device_decoder.cuh"
#include "cuda/device_session.cuh"
#include "cuda/fill.cuh"
#include "cuda/paged_attention.cuh"
#include "support/perf_args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

using namespace optkit;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr int kLayers = 32, kHidden = 4096, kIntermediate = 14336, kHeads = 32, kKvHeads = 8, kHeadDim = 128,
              kVocab = 128256, kBlockTokens = 16;

// Fills with small pseudo-random values (xorshift), fast enough for gigabytes.
template <class T, class Make>
void
fill(std::vector<T>& v, std::uint32_t seed, Make make) {
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& e : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    e = make(x);
  }
}

double
peak_bandwidth_gbs(const cuda::DeviceSession& s) {
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, s.device);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, s.device);
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8) / 1e9;
}

void
attention_table(int device) {
  cuda::DeviceSession s(device);
  const double peak = peak_bandwidth_gbs(s);
  fmt::print("{}: attention, BF16 cache, Llama-3.1-8B heads ({} / {} KV, head_dim {}); peak {:.0f} GB/s\n",
             s.properties.name, kHeads, kKvHeads, kHeadDim, peak);
  fmt::print("{:>5} {:>7}   {:>22}   {:>22}   {:>7}\n", "batch", "context", "paged us (GB/s, peak)",
             "contiguous us (GB/s)", "ratio");
  const int shapes[][2] = {{64, 2048}, {16, 4096}, {64, 1024}, {1, 8192}};
  for (const auto& shape : shapes) {
    const int batch = shape[0], context = shape[1];
    const auto cache =
        static_cast<std::size_t>(std::int64_t(batch) * kKvHeads * context * kHeadDim); // elements of K (and of V)
    const double bytes = 2.0 * double(cache) * 2;
    cuda::DeviceArray<unsigned char> k, v;
    k.reserve(cache * 2);
    v.reserve(cache * 2);
    cuda::fill_finite_bytes(k.data, cache * 2, 1, s.stream);
    cuda::fill_finite_bytes(v.data, cache * 2, 2, s.stream);
    // Paged: each sequence's blocks in a shuffled order, rows at the last position.
    const int blocks_per = context / kBlockTokens;
    std::vector<int> meta(static_cast<std::size_t>(batch * 3)), tables(static_cast<std::size_t>(batch * blocks_per));
    for (int b = 0; b < batch; ++b) {
      meta[std::size_t(b)] = -1;
      meta[std::size_t(batch + b)] = context - 1;
      meta[std::size_t(2 * batch + b)] = b * blocks_per;
      for (int i = 0; i < blocks_per; ++i)
        tables[std::size_t(b * blocks_per + i)] = (b * blocks_per + i * 7919) % (batch * blocks_per);
    }
    meta.insert(meta.end(), tables.begin(), tables.end());
    cuda::DeviceArray<int> device_meta;
    device_meta.upload(meta.data(), meta.size());
    cuda::DeviceArray<float> q, out, scratch;
    q.reserve(std::size_t(batch) * kHeads * kHeadDim);
    out.reserve(std::size_t(batch) * kHeads * kHeadDim);
    cuda::fill_finite_bytes(q.data, std::size_t(batch) * kHeads * kHeadDim * 4, 3, s.stream);
    const cuda::PagedAttentionShape paged_shape{batch, kHeads, kKvHeads, kHeadDim, context, 0};
    const auto plan = cuda::plan_paged_attention(paged_shape, s.properties.multiProcessorCount);
    scratch.reserve(cuda::paged_attention_scratch_floats(paged_shape, plan));
    const int* m = device_meta.data;
    const cuda::DeviceRows rows{m, m + batch, m + 2 * batch, m + 3 * batch};
    const cuda::PagedKv kv{k.data, v.data, true, kKvHeads, kHeadDim, kBlockTokens};
    const float scale = 1.0f / std::sqrt(float(kHeadDim));
    cuda::check(cudaDeviceSynchronize(), "setup");
    const double paged_us = s.time_us([&] {
      cuda::launch_paged_attention(q.data, kv, rows, out.data, scratch.data, paged_shape, plan, scale, s.stream);
    });
    // Contiguous: the same bytes as [batch, kv_heads, context, head_dim].
    const cuda::DecodeAttentionShape shape_c{batch, kHeads, kKvHeads, kHeadDim, context};
    const auto splits = cuda::plan_decode_splits(shape_c, s.properties.multiProcessorCount);
    cuda::DeviceArray<__nv_bfloat16> q16, out16;
    q16.reserve(std::size_t(batch) * kHeads * kHeadDim);
    out16.reserve(std::size_t(batch) * kHeads * kHeadDim);
    cuda::fill_finite_bytes(q16.data, std::size_t(batch) * kHeads * kHeadDim * 2, 4, s.stream);
    cuda::DeviceArray<float> partial, stats;
    partial.reserve(cuda::decode_attention_partial_floats(shape_c, splits));
    stats.reserve(cuda::decode_attention_stats_floats(shape_c, splits));
    const double contiguous_us = s.time_us([&] {
      cuda::launch_decode_attention(q16.data, reinterpret_cast<const __nv_bfloat16*>(k.data),
                                    reinterpret_cast<const __nv_bfloat16*>(v.data), out16.data, partial.data,
                                    stats.data, shape_c, splits, scale, s.stream);
    });
    const double paged_gbs = bytes / paged_us / 1e3, contiguous_gbs = bytes / contiguous_us / 1e3;
    fmt::print("{:>5} {:>7}   {:>8.1f} ({:>5.0f}, {:>3.0f} %)   {:>10.1f} ({:>5.0f})     {:>6.2f}x\n", batch, context,
               paged_us, paged_gbs, 100 * paged_gbs / peak, contiguous_us, contiguous_gbs, paged_us / contiguous_us);
  }
}

// A random 2:4 4-bit Δ of a matrix of `cols` columns (group 128), over shared host buffers.
struct RandomDeltas {
  std::vector<std::int32_t> values;
  std::vector<std::uint8_t> indices;
  std::vector<float> scales;
  explicit RandomDeltas(std::size_t max_rows) {
    values.resize(max_rows * (kIntermediate / 16));
    indices.resize(max_rows * (kIntermediate / 8));
    scales.resize(max_rows * (kIntermediate / 128));
    fill(values, 5, [](std::uint32_t x) { return static_cast<std::int32_t>(x); });
    fill(indices, 6, [](std::uint32_t x) { return static_cast<std::uint8_t>(0x4u | (0x4u << 4) | (x & 0x11u)); });
    fill(scales, 7, [](std::uint32_t x) { return 1e-3f * float(x % 1000) / 1000.0f; });
  }
  cuda::PackedDelta of(int cols) const {
    return {4, true, 0.5f, cols / 16, 128, cols / 128, values.data(), indices.data(), scales.data()};
  }
};

// A step's rows as the decoder takes them, over the shared block tables and embeddings.
struct StepRows {
  std::vector<int> slot, position, table_start, output_row;
  cuda::DecoderStep step(const std::vector<int>& tables, const std::vector<float>& embeddings) const {
    return {static_cast<int>(slot.size()),
            embeddings.data(),
            slot.data(),
            position.data(),
            table_start.data(),
            tables.data(),
            static_cast<int>(tables.size()),
            static_cast<int>(output_row.size()),
            output_row.data()};
  }
};

double
median_step_ms(cuda::DeviceDecoder& decoder, const cuda::DecoderStep& step, std::vector<float>& logits, int steps) {
  std::vector<double> ms;
  for (int i = 0; i < steps + 2; ++i) {
    const auto t0 = SteadyClock::now();
    decoder.forward(step, logits.data());
    const double elapsed = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
    if (i >= 2)
      ms.push_back(elapsed);
  }
  std::nth_element(ms.begin(), ms.begin() + std::ptrdiff_t(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

void
step_table(int device, int context) {
  cuda::DecoderDims dims;
  dims.layers = kLayers;
  dims.hidden = kHidden;
  dims.intermediate = kIntermediate;
  dims.heads = kHeads;
  dims.kv_heads = kKvHeads;
  dims.head_dim = kHeadDim;
  dims.vocab = kVocab;
  dims.eps = 1e-5f;
  cuda::DeviceDecoder decoder(device, dims, true, kBlockTokens);
  const auto t0 = SteadyClock::now();
  std::vector<float> weights(std::size_t(kVocab) * kHidden);
  fill(weights, 1, [](std::uint32_t x) { return (float(x >> 8) / 16777216.0f - 0.5f) * 0.04f; });
  std::vector<float> ones(kIntermediate, 1.0f), inverse_frequency(kHeadDim / 2);
  for (int i = 0; i < kHeadDim / 2; ++i)
    inverse_frequency[std::size_t(i)] = std::pow(500000.0f, -2.0f * float(i) / kHeadDim);
  const int q_dim = kHeads * kHeadDim, kv_dim = kKvHeads * kHeadDim;
  const int shapes[7][2] = {{q_dim, kHidden},        {kv_dim, kHidden},        {kv_dim, kHidden},
                            {kHidden, q_dim},        {kIntermediate, kHidden}, {kIntermediate, kHidden},
                            {kHidden, kIntermediate}};
  for (int l = 0; l < kLayers; ++l) {
    for (int p = 0; p < 7; ++p)
      decoder.set_matrix(l, p, weights.data(), shapes[p][0], shapes[p][1]);
    decoder.set_vector(l, cuda::DecoderVector::input_norm, -1, ones.data(), kHidden);
    decoder.set_vector(l, cuda::DecoderVector::post_norm, -1, ones.data(), kHidden);
  }
  decoder.set_matrix(kLayers, 0, weights.data(), kVocab, kHidden);
  decoder.set_vector(kLayers, cuda::DecoderVector::input_norm, -1, ones.data(), kHidden);
  decoder.set_inverse_frequencies(inverse_frequency.data());
  const int sequences = 16, variants = 8;
  const int blocks_per = (context + 64 + kBlockTokens - 1) / kBlockTokens;
  decoder.allocate_kv(std::int64_t(sequences) * blocks_per);
  const RandomDeltas deltas(kVocab);
  for (int v = 0; v < variants; ++v) {
    for (int l = 0; l < kLayers; ++l)
      for (int p = 0; p < 7; ++p)
        decoder.set_delta(l, p, v, deltas.of(shapes[p][1]));
    decoder.set_delta(kLayers, 0, v, deltas.of(kHidden));
  }
  fmt::print("\n{}: Llama-3.1-8B-shaped decoder, BF16 weights {:.1f} GB, {} variants' Δs {:.1f} GB, set up in {:.0f} "
             "s\n",
             decoder.device_name(), double(decoder.weight_bytes()) / 1e9, variants, double(decoder.delta_bytes()) / 1e9,
             std::chrono::duration<double>(SteadyClock::now() - t0).count());

  std::vector<int> tables;
  for (int b = 0; b < sequences * blocks_per; ++b)
    tables.push_back(b);
  std::vector<float> embeddings(static_cast<std::size_t>(std::int64_t(sequences) * context * kHidden));
  fill(embeddings, 9, [](std::uint32_t x) { return float(x >> 8) / 16777216.0f - 0.5f; });
  std::vector<float> logits(std::size_t(sequences) * kVocab);
  // Prefill: 4 sequences of `context` tokens a step, the base's.
  double prefill_s = 0;
  for (int first = 0; first < sequences; first += 4) {
    StepRows rows;
    for (int s = first; s < first + 4; ++s) {
      for (int p = 0; p < context; ++p) {
        rows.slot.push_back(-1);
        rows.position.push_back(p);
        rows.table_start.push_back(s * blocks_per);
      }
      rows.output_row.push_back(static_cast<int>(rows.position.size()) - 1);
    }
    const cuda::DecoderStep step = rows.step(tables, embeddings);
    const auto start = SteadyClock::now();
    decoder.forward(step, logits.data());
    prefill_s += std::chrono::duration<double>(SteadyClock::now() - start).count();
  }
  fmt::print("prefill: {} sequences × {} tokens in {:.2f} s ({:.0f} tokens/s)\n", sequences, context, prefill_s,
             sequences * context / prefill_s);

  StepRows rows{std::vector<int>(sequences, -1), std::vector<int>(sequences, context), {}, {}};
  for (int s = 0; s < sequences; ++s) {
    rows.table_start.push_back(s * blocks_per);
    rows.output_row.push_back(s);
  }
  const cuda::DecoderStep step = rows.step(tables, embeddings); // points at rows.slot, changed below
  const double base_ms = median_step_ms(decoder, step, logits, 30);
  const double weight_gb = double(decoder.weight_bytes()) / 1e9;
  const double delta_gb = double(decoder.delta_bytes()) / 1e9 / variants; // one variant's Δs
  fmt::print("decode step, batch {} at position {}:\n", sequences, context);
  fmt::print("  base only            {:>7.2f} ms  ({:>6.0f} tokens/s, weights {:.0f} GB/s)\n", base_ms,
             sequences / base_ms * 1e3, weight_gb / base_ms * 1e3);
  // The rows spread evenly over 1, 2 and 8 variants: the step reads each one's Δs once. The bytes
  // bound the ratio from below: (base + n · Δ) / base.
  for (const int used : {1, 2, variants}) {
    for (int s = 0; s < sequences; ++s)
      rows.slot[std::size_t(s)] = s / (sequences / used); // in order, sequences / used rows a variant
    const double delta_ms = median_step_ms(decoder, step, logits, 30);
    fmt::print("  {} variant(s) (SBMM) {:>7.2f} ms  ({:>6.0f} tokens/s)   ratio {:.2f}x, bytes bound {:.2f}x, "
               "Δ read at {:.0f} GB/s beyond the base\n",
               used, delta_ms, sequences / delta_ms * 1e3, delta_ms / base_ms,
               (weight_gb + used * delta_gb) / weight_gb, used * delta_gb / std::max(delta_ms - base_ms, 1e-3) * 1e3);
  }
  bool finite = true;
  for (std::size_t i = 0; i < std::size_t(kVocab); ++i)
    finite = finite && std::isfinite(logits[i]);
  fmt::print("  logits finite: {}\n", finite ? "yes" : "NO");
}

} // namespace

int
main(int argc, char** argv) {
  constexpr std::string_view kUsage = "perf_decoder_cuda [device, default 0] [context, default 1024]";
  const int device = test::positional_number(argc, argv, 1, "device", 0, 0, kUsage);
  const int context = test::positional_number(argc, argv, 2, "context", 1024, 1, kUsage);
  try {
    attention_table(device);
    step_table(device, context);
  } catch (const std::exception& e) {
    fmt::print(stderr, "perf_decoder_cuda: {}\n", e.what());
    return 3;
  }
  return 0;
}
