#include "device_decoder.cuh"

#include "check.cuh"
#include "decoder_kernels.cuh"
#include "device_array.cuh"
#include "device_session.cuh"
#include "gemm.cuh"
#include "paged_attention.cuh"
#include "sbmm.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace optkit::cuda {

namespace {

// One weight matrix [rows, cols], row-major, in the decoder's weight type, with its Δ slots.
struct Weight {
  int rows, cols;
  DeviceArray<unsigned char> data;
  DeltaSlots deltas;
  Weight(int r, int c) : rows(r), cols(c), deltas(r, c) {}
};

// One vector of every layer (a norm or a bias) per slot, and the table the kernels index by
// slot + 1: a slot without its own points at the base's.
struct SlotVectors {
  std::vector<std::unique_ptr<DeviceArray<float>>> own; // [slot + 1]
  DeviceArray<const float*> table;
  int table_slots = -1; // slots the uploaded table covers
  bool stale = true;

  bool present() const { return !own.empty() && own[0]; }
  const float* const* device_table(int slots, cudaStream_t stream) {
    if (!present())
      return nullptr;
    if (stale || table_slots != slots) {
      std::vector<const float*> pointers(static_cast<std::size_t>(slots) + 1, own[0]->data);
      for (std::size_t s = 1; s < own.size() && s < pointers.size(); ++s)
        if (own[s])
          pointers[s] = own[s]->data;
      table.reserve(pointers.size(), "cudaMalloc (vector table)");
      check(cudaMemcpyAsync(table.data, pointers.data(), pointers.size() * sizeof(const float*), cudaMemcpyHostToDevice,
                            stream),
            "cudaMemcpyAsync (vector table)");
      check(cudaStreamSynchronize(stream), "the vector table upload");
      table_slots = slots;
      stale = false;
    }
    return table.data;
  }
};

// Runs of consecutive rows of one slot ≥ 0 (rows `row_of(i)` for i < count) as SBMM tiles.
template <class SlotOf>
void
append_slot_tiles(int count, SlotOf slot_of, int slots, std::vector<SbmmTile>& tiles) {
  for (int i = 0; i < count;) {
    const int s = slot_of(i);
    int end = i + 1;
    while (end < count && slot_of(end) == s)
      ++end;
    if (s >= 0 && s < slots)
      append_sbmm_tiles(i, end - i, s, tiles);
    i = end;
  }
}

} // namespace

struct DeviceDecoder::State : DeviceSession {
  DecoderDims dims;
  bool bf16;
  int block_tokens;
  int slots = 0; // every slot below this has a table entry in every matrix and vector table
  std::vector<std::unique_ptr<Weight>> weights; // layer · 7 + projection; the LM head last
  std::vector<SlotVectors> vectors;             // (layers + 1) · 7
  DeviceArray<float> inverse_frequency;
  std::vector<DeviceArray<unsigned char>> keys, values; // per layer
  std::int64_t kv_blocks = 0;
  std::map<std::tuple<int, int, int>, std::unique_ptr<LtMatmul>> products; // by (rows, cols, m)

  // Per-step buffers, grown as needed.
  DeviceArray<float> x, h, q, k, v, attended, projected, gate, up, logits, scratch, staging;
  DeviceArray<__nv_bfloat16> h16, attended16, gate16;
  DeviceArray<int> meta;
  DeviceArray<SbmmTile> tiles;
  std::vector<int> host_meta;
  std::vector<SbmmTile> host_tiles;

  State(int device, const DecoderDims& d, bool use_bf16, int tokens)
      : DeviceSession(device), dims(d), bf16(use_bf16), block_tokens(tokens) {
    weights.resize(static_cast<std::size_t>(d.layers * kDecoderProjections + 1));
    vectors.resize(static_cast<std::size_t>((d.layers + 1) * kDecoderVectors));
  }

  std::size_t element_bytes() const { return bf16 ? 2 : 4; }
  Weight& weight(int layer, int projection) {
    if (layer < 0 || layer > dims.layers || projection < 0 || projection >= kDecoderProjections)
      throw std::runtime_error("no decoder matrix of layer " + std::to_string(layer) + ", projection " +
                               std::to_string(projection));
    auto& w = weights[static_cast<std::size_t>(layer == dims.layers ? layer * kDecoderProjections
                                                                    : layer * kDecoderProjections + projection)];
    if (!w)
      throw std::runtime_error("decoder matrix of layer " + std::to_string(layer) + " was not uploaded");
    return *w;
  }
  SlotVectors& vector(int layer, DecoderVector which) {
    return vectors[static_cast<std::size_t>(layer * kDecoderVectors + static_cast<int>(which))];
  }
  const float* const* table(int layer, DecoderVector which) { return vector(layer, which).device_table(slots, stream); }

  // Every matrix and table takes slots below `count`.
  void widen(int count) {
    if (count <= slots)
      return;
    slots = count;
    for (auto& w : weights)
      if (w)
        w->deltas.widen(count);
  }

  // Column-major: D (rows × m, fp32) = op(A: cols × rows)ᵀ · B (cols × m).
  const LtMatmul& product(int rows, int cols, int m) {
    auto& p = products[{rows, cols, m}];
    if (!p) {
      const cudaDataType_t in = bf16 ? CUDA_R_16BF : CUDA_R_32F;
      const Operand a{in, cols, rows, cols}, b{in, cols, m, cols}, d{CUDA_R_32F, rows, m, rows};
      p = std::make_unique<LtMatmul>(lt, handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUBLAS_OP_T, CUBLAS_OP_N, a, b, d,
                                     kWorkspaceBytes, 1.0f);
    }
    return *p;
  }
  // y[m, w.rows] = x[m, w.cols] · Wᵀ, plus each tile's slot's Δ product.
  void multiply(Weight& w, int m, const float* x32, const __nv_bfloat16* x16, float* y, const SbmmTile* tile_list,
                int tile_count) {
    product(w.rows, w.cols, m).run(w.data.data, bf16 ? static_cast<const void*>(x16) : x32, y, workspace, stream);
    if (tile_count > 0)
      launch_sbmm(x32, y, w.rows, w.cols, w.deltas.table(stream), tile_list, tile_count, stream);
  }

  PagedKv paged(int layer) {
    const auto l = static_cast<std::size_t>(layer);
    return {keys[l].data, values[l].data, bf16, dims.kv_heads, dims.head_dim, block_tokens};
  }

  // A step as the device runs it: its rows' metadata there, the SBMM tiles of its rows' and of its
  // output rows' variant segments, and the attention's plan.
  struct Step {
    int rows = 0, outputs = 0;
    DeviceRows device_rows;
    const int* output_row = nullptr;
    int row_tiles = 0, head_tiles = 0; // in `tiles`: the rows' first, then the output rows'
    PagedAttentionShape shape{};
    PagedAttentionPlan plan{};
  };

  Step upload_step(const DecoderStep& step) {
    Step p;
    p.rows = step.rows;
    p.outputs = step.outputs;
    int max_slot = -1, max_length = 0;
    for (int r = 0; r < step.rows; ++r) {
      max_slot = std::max(max_slot, step.slot[r]);
      max_length = std::max(max_length, step.position[r] + 1);
    }
    widen(max_slot + 1);
    upload_rows(step);
    upload_tiles(step, p);
    const int* slot = meta.data;
    p.device_rows = {slot, slot + p.rows, slot + 2 * p.rows, slot + 3 * p.rows + p.outputs};
    p.output_row = slot + 3 * p.rows;
    p.shape = {p.rows, dims.heads, dims.kv_heads, dims.head_dim, max_length, dims.sliding_window};
    p.plan = plan_paged_attention(p.shape, properties.multiProcessorCount);
    reserve_buffers(p);
    check(cudaMemcpyAsync(x.data, step.embeddings, std::size_t(p.rows) * dims.hidden * sizeof(float),
                          cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (embeddings)");
    return p;
  }

  // The metadata in one upload: slot | position | table_start | output_row | tables.
  void upload_rows(const DecoderStep& step) {
    for (int t = 0; t < step.table_size; ++t)
      if (step.tables[t] < 0 || step.tables[t] >= kv_blocks)
        throw std::runtime_error("block " + std::to_string(step.tables[t]) + " is outside the device cache of " +
                                 std::to_string(kv_blocks));
    host_meta.assign(step.slot, step.slot + step.rows);
    host_meta.insert(host_meta.end(), step.position, step.position + step.rows);
    host_meta.insert(host_meta.end(), step.table_start, step.table_start + step.rows);
    host_meta.insert(host_meta.end(), step.output_row, step.output_row + step.outputs);
    host_meta.insert(host_meta.end(), step.tables, step.tables + step.table_size);
    meta.reserve(host_meta.size());
    check(cudaMemcpyAsync(meta.data, host_meta.data(), host_meta.size() * sizeof(int), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (step rows)");
  }

  void upload_tiles(const DecoderStep& step, Step& p) {
    host_tiles.clear();
    append_slot_tiles(
        step.rows, [&](int r) { return step.slot[r]; }, slots, host_tiles);
    p.row_tiles = static_cast<int>(host_tiles.size());
    append_slot_tiles(
        step.outputs, [&](int i) { return step.slot[step.output_row[i]]; }, slots, host_tiles);
    p.head_tiles = static_cast<int>(host_tiles.size()) - p.row_tiles;
    tiles.reserve(host_tiles.size());
    if (!host_tiles.empty())
      check(cudaMemcpyAsync(tiles.data, host_tiles.data(), host_tiles.size() * sizeof(SbmmTile), cudaMemcpyHostToDevice,
                            stream),
            "cudaMemcpyAsync (tiles)");
  }

  void reserve_buffers(const Step& p) {
    const auto n = static_cast<std::size_t>(p.rows);
    const std::size_t q_dim = std::size_t(dims.heads) * dims.head_dim,
                      kv_dim = std::size_t(dims.kv_heads) * dims.head_dim;
    x.reserve(n * dims.hidden, "cudaMalloc (activations)");
    h.reserve(n * dims.hidden);
    q.reserve(n * q_dim);
    k.reserve(n * kv_dim);
    v.reserve(n * kv_dim);
    attended.reserve(n * q_dim);
    projected.reserve(n * dims.hidden);
    gate.reserve(n * dims.intermediate);
    up.reserve(n * dims.intermediate);
    logits.reserve(std::size_t(std::max(p.outputs, 1)) * dims.vocab);
    if (bf16) {
      h16.reserve(n * dims.hidden);
      attended16.reserve(n * q_dim);
      gate16.reserve(n * dims.intermediate);
    }
    scratch.reserve(paged_attention_scratch_floats(p.shape, p.plan));
  }

  // A product's BF16 input buffer (null with fp32 weights).
  __nv_bfloat16* gemm_in(DeviceArray<__nv_bfloat16>& buffer) const { return bf16 ? buffer.data : nullptr; }

  // One decoder layer over the step's rows: attention, then the MLP, each added to x.
  void run_layer(int l, const Step& p) {
    const std::int64_t n = p.rows;
    const int* slot = p.device_rows.slot;
    const auto project = [&](int projection, const float* in, const __nv_bfloat16* in16, float* out) {
      multiply(weight(l, projection), p.rows, in, in16, out, tiles.data, p.row_tiles);
    };
    launch_rms_norm(x.data, nullptr, slot, table(l, DecoderVector::input_norm), p.rows, dims.hidden, dims.eps, h.data,
                    gemm_in(h16), stream);
    project(0, h.data, gemm_in(h16), q.data);
    project(1, h.data, gemm_in(h16), k.data);
    project(2, h.data, gemm_in(h16), v.data);
    const QkvTables qkv{table(l, DecoderVector::q_bias), table(l, DecoderVector::k_bias),
                        table(l, DecoderVector::v_bias), table(l, DecoderVector::q_norm),
                        table(l, DecoderVector::k_norm)};
    launch_qkv_finish(q.data, k.data, v.data, p.device_rows, p.rows, dims.heads, qkv, dims.eps, inverse_frequency.data,
                      paged(l), stream);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
    launch_paged_attention(q.data, paged(l), p.device_rows, attended.data, scratch.data, p.shape, p.plan, scale,
                           stream);
    if (bf16)
      launch_to_bf16(attended.data, attended16.data, n * dims.heads * dims.head_dim, stream);
    project(3, attended.data, gemm_in(attended16), projected.data);
    launch_add(x.data, projected.data, n * dims.hidden, stream);
    launch_rms_norm(x.data, nullptr, slot, table(l, DecoderVector::post_norm), p.rows, dims.hidden, dims.eps, h.data,
                    gemm_in(h16), stream);
    project(4, h.data, gemm_in(h16), gate.data);
    project(5, h.data, gemm_in(h16), up.data);
    launch_silu_multiply(gate.data, up.data, n * dims.intermediate, gemm_in(gate16), stream);
    project(6, gate.data, gemm_in(gate16), projected.data);
    launch_add(x.data, projected.data, n * dims.hidden, stream);
  }

  // The final norm and the LM head over the output rows; their logits copied to `out`.
  void run_head(const Step& p, float* out) {
    launch_rms_norm(x.data, p.output_row, p.device_rows.slot, table(dims.layers, DecoderVector::input_norm), p.outputs,
                    dims.hidden, dims.eps, h.data, gemm_in(h16), stream);
    multiply(weight(dims.layers, 0), p.outputs, h.data, gemm_in(h16), logits.data, tiles.data + p.row_tiles,
             p.head_tiles);
    check(cudaMemcpyAsync(out, logits.data, std::size_t(p.outputs) * dims.vocab * sizeof(float), cudaMemcpyDeviceToHost,
                          stream),
          "cudaMemcpyAsync (logits)");
  }
};

DeviceDecoder::DeviceDecoder(int device, const DecoderDims& dims, bool bf16, int block_tokens) {
  if (const auto why = unsupported(dims); !why.empty())
    throw std::runtime_error(why);
  if (block_tokens < 1)
    throw std::runtime_error("a cache block holds at least one position");
  m_state = std::make_unique<State>(device, dims, bf16, block_tokens);
}

DeviceDecoder::~DeviceDecoder() = default;

std::string
DeviceDecoder::unsupported(const DecoderDims& d) {
  if (!paged_attention_supports(d.head_dim, d.heads, d.kv_heads))
    return "the device's attention takes head_dim 32, 64, 128 or 256 and up to 8 query heads per KV head (this "
           "model: head_dim " +
           std::to_string(d.head_dim) + ", " + std::to_string(d.heads) + " heads over " + std::to_string(d.kv_heads) +
           " KV heads)";
  return {};
}

std::string
DeviceDecoder::device_name() const {
  return m_state->properties.name;
}

void
DeviceDecoder::set_matrix(int layer, int projection, const float* w, int rows, int cols) {
  State& s = *m_state;
  s.make_current();
  if (layer < 0 || layer > s.dims.layers || projection < 0 || projection >= kDecoderProjections || rows < 1 || cols < 1)
    throw std::runtime_error("decoder matrix of layer " + std::to_string(layer) + " is out of range");
  auto weight = std::make_unique<Weight>(rows, cols);
  const std::size_t count = std::size_t(rows) * cols;
  weight->data.reserve(count * s.element_bytes(), "cudaMalloc (weights)");
  if (!s.bf16) {
    check(cudaMemcpy(weight->data.data, w, count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy (weights)");
  } else { // through an fp32 staging buffer of at most 64 MiB, converted on the device
    const std::size_t chunk = std::max<std::size_t>(cols, (std::size_t(64) << 20) / sizeof(float) / cols * cols);
    s.staging.reserve(std::min(chunk, count), "cudaMalloc (weight staging)");
    auto* out = reinterpret_cast<__nv_bfloat16*>(weight->data.data);
    for (std::size_t at = 0; at < count; at += chunk) {
      const std::size_t n = std::min(chunk, count - at);
      check(cudaMemcpy(s.staging.data, w + at, n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy (weights)");
      launch_to_bf16(s.staging.data, out + at, static_cast<std::int64_t>(n), nullptr);
      check(cudaDeviceSynchronize(), "the weight conversion");
    }
  }
  weight->deltas.widen(s.slots);
  s.weights[static_cast<std::size_t>(layer == s.dims.layers ? layer * kDecoderProjections
                                                            : layer * kDecoderProjections + projection)] =
      std::move(weight);
}

void
DeviceDecoder::set_vector(int layer, DecoderVector which, int slot, const float* v, int n) {
  State& s = *m_state;
  s.make_current();
  if (layer < 0 || layer > s.dims.layers || slot < -1 || slot > 1'000'000)
    throw std::runtime_error("decoder vector of layer " + std::to_string(layer) + ", slot " + std::to_string(slot) +
                             " is out of range");
  SlotVectors& vectors = s.vector(layer, which);
  const auto index = static_cast<std::size_t>(slot + 1);
  if (index >= vectors.own.size())
    vectors.own.resize(index + 1);
  if (v == nullptr) {
    vectors.own[index].reset();
  } else {
    auto array = std::make_unique<DeviceArray<float>>();
    array->upload(v, static_cast<std::size_t>(n));
    check(cudaDeviceSynchronize(), "uploads");
    vectors.own[index] = std::move(array);
  }
  vectors.stale = true;
  s.widen(slot + 1);
}

void
DeviceDecoder::set_inverse_frequencies(const float* inverse_frequency) {
  m_state->make_current();
  m_state->inverse_frequency.upload(inverse_frequency, static_cast<std::size_t>(m_state->dims.head_dim / 2));
  check(cudaDeviceSynchronize(), "uploads");
}

void
DeviceDecoder::set_delta(int layer, int projection, int slot, const PackedDelta& delta) {
  State& s = *m_state;
  s.make_current();
  s.weight(layer, projection).deltas.set(slot, delta);
  s.widen(slot + 1);
}

void
DeviceDecoder::clear_slot(int slot) {
  State& s = *m_state;
  s.make_current();
  for (auto& w : s.weights)
    if (w)
      w->deltas.clear(slot);
  for (auto& vectors : s.vectors)
    if (slot >= 0 && static_cast<std::size_t>(slot) + 1 < vectors.own.size() &&
        vectors.own[static_cast<std::size_t>(slot) + 1]) {
      vectors.own[static_cast<std::size_t>(slot) + 1].reset();
      vectors.stale = true;
    }
}

std::uint64_t
DeviceDecoder::kv_block_bytes() const {
  const DecoderDims& d = m_state->dims;
  return std::uint64_t(d.layers) * 2 * m_state->block_tokens * d.kv_heads * d.head_dim * m_state->element_bytes();
}

std::uint64_t
DeviceDecoder::free_bytes() const {
  m_state->make_current();
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

void
DeviceDecoder::allocate_kv(std::int64_t blocks) {
  State& s = *m_state;
  s.make_current();
  const std::size_t bytes =
      std::size_t(blocks) * s.block_tokens * s.dims.kv_heads * s.dims.head_dim * s.element_bytes();
  s.keys.clear();
  s.values.clear();
  s.keys.reserve(static_cast<std::size_t>(s.dims.layers));
  s.values.reserve(static_cast<std::size_t>(s.dims.layers));
  for (int l = 0; l < s.dims.layers; ++l) {
    s.keys.emplace_back().reserve(bytes, "cudaMalloc (KV cache)");
    s.values.emplace_back().reserve(bytes, "cudaMalloc (KV cache)");
  }
  s.kv_blocks = blocks;
}

void
DeviceDecoder::forward(const DecoderStep& step, float* logits) {
  State& s = *m_state;
  s.make_current();
  if (step.rows < 1 || step.outputs < 0 || step.outputs > step.rows)
    throw std::runtime_error("a device step needs rows (got " + std::to_string(step.rows) + ")");
  if (s.keys.empty())
    throw std::runtime_error("the device's KV cache is not allocated");
  const State::Step planned = s.upload_step(step);
  for (int l = 0; l < s.dims.layers; ++l)
    s.run_layer(l, planned);
  if (step.outputs > 0)
    s.run_head(planned, logits);
  check(cudaStreamSynchronize(s.stream), "the device step");
}

std::uint64_t
DeviceDecoder::weight_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& w : m_state->weights)
    if (w)
      bytes += std::uint64_t(w->rows) * std::uint64_t(w->cols) * m_state->element_bytes();
  return bytes;
}

std::uint64_t
DeviceDecoder::delta_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& w : m_state->weights)
    if (w)
      bytes += w->deltas.bytes();
  return bytes;
}

} // namespace optkit::cuda
