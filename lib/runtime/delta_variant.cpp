#include "runtime/delta_variant.hpp"

#include "runtime/delta_int8.hpp"

#include "runtime/delta_decode.hpp"
#include "runtime/dot_rows.hpp"
#include "runtime/panel_gemm.hpp"

#include "core/error.hpp"
#include "quant/packing.hpp"
#include "runtime/layer_vectors.hpp"
#include "runtime/weight_loader.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

namespace optkit::runtime {

namespace {

constexpr std::int64_t kDecodeBlockRows = 32;
constexpr std::int64_t kFewRows = 8;            // up to this many activation rows: row dots, not sgemm
constexpr std::int64_t kDeltaPanelMinRows = 16; // from this many: the AVX-512 panel GEMM, where the CPU has it

} // namespace

std::unique_ptr<CompressedDelta>
CompressedDelta::load(const quant::DeltaArtifact& artifact, const std::string& module, std::int64_t rows,
                      std::int64_t cols) {
  if (!artifact.has_delta(module))
    return nullptr;
  const auto stored = artifact.stored_delta(module, rows, cols);
  auto d = std::unique_ptr<CompressedDelta>(new CompressedDelta());
  d->m_rows = rows;
  d->m_scales = stored.scale.to_floats();
  d->m_codes = {stored.bits,       stored.sparse, stored.offset, cols,           stored.words,
                stored.group_size, stored.groups, stored.values, stored.indices, d->m_scales.data()};
  d->m_integer_capable = delta_int8_supported(d->m_codes, delta_pairs_distinct(d->m_codes, rows));
  if (d->m_integer_capable)
    d->m_int8_offsets = delta_int8_row_offsets(d->m_codes, rows);
  return d;
}

void
CompressedDelta::decode_rows(std::int64_t r0, std::int64_t n, float* out) const {
  decode_delta_rows(m_codes, r0, n, out);
}

void
CompressedDelta::row_add(std::int64_t r, float* out) const {
  thread_local std::vector<float> row;
  row.resize(static_cast<std::size_t>(m_codes.cols));
  decode_rows(r, 1, row.data());
  for (std::int64_t c = 0; c < m_codes.cols; ++c)
    out[c] += row[static_cast<std::size_t>(c)];
}

void
CompressedDelta::multiply_add(const float* x, std::int64_t m, float* y, std::int64_t ldy, ThreadPool& pool) const {
  if (m_integer_kernel) {
    // Decode rows and prefill chunks alike: the packed Δ against the int8 activations, each row
    // on its own, so its product does not depend on how many rows share its step (a prompt
    // computed whole or after a cached prefix decodes alike). perf_delta_kernel, 8192 × 2048, AVX2
    // on 2 cores: 0.45×, 0.55× and 0.61× the base product's time at 32, 64 and 128 rows, against
    // 1.2×, 1.1× and 1.1× on the float path.
    const QuantizedActivations q = quantize_activations_u8(x, m, m_codes.cols, false);
    pool.parallel_for(
        m_rows, [&](std::int64_t r0, std::int64_t r1) { delta_int8_rows(m_codes, m_int8_offsets, r0, r1, q, y, ldy); },
        delta_int8_task_rows(m_rows, pool.size()));
    return;
  }
  const std::int64_t blocks = (m_rows + kDecodeBlockRows - 1) / kDecodeBlockRows;
  // A batch of prefills, on a CPU with the AVX-512 kernels: x is packed once for the panel GEMM,
  // which multiplies each decoded block while it sits in L1; sgemm would pack x and the block anew
  // for every block (perf_sbmm on 2 cores, 8 variants × 16 rows: 243 ms with sgemm, 53 with the
  // panel GEMM; × 64 rows: 310 and 106). Under 16 rows OpenBLAS's small-matrix kernel, which packs
  // nothing, is as fast or faster (× 12 rows: 27–32 ms against 33–47).
  std::optional<PackedActivations> packed;
  if (m >= kDeltaPanelMinRows && panel_gemm_supported(PanelProduct::f32))
    packed = pack_activations(x, m, m_codes.cols, PanelProduct::f32);
  pool.parallel_for(blocks, [&](std::int64_t b0, std::int64_t b1) {
    thread_local std::vector<float> decoded, part;
    decoded.resize(static_cast<std::size_t>(kDecodeBlockRows * m_codes.cols));
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t r0 = b * kDecodeBlockRows, n = std::min(kDecodeBlockRows, m_rows - r0);
      decode_rows(r0, n, decoded.data()); // once per block, for every row of the segment
      if (m > kFewRows && !packed) {      // OpenBLAS: 9 to 15 rows, or no AVX-512
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
                    static_cast<blasint>(m_codes.cols), 1.0f, x, static_cast<blasint>(m_codes.cols), decoded.data(),
                    static_cast<blasint>(m_codes.cols), 1.0f, y + r0, static_cast<blasint>(ldy));
        continue;
      }
      part.resize(static_cast<std::size_t>(m * n));
      if (packed)
        panel_gemm_rows(decoded.data(), 0, n, *packed, part.data(), n);
      else // decode steps: a few activation rows, the row-dot kernel (sgemm's packing costs more than the product)
        dot_rows(decoded.data(), m_codes.cols, 0, n, x, m, part.data(), n);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t r = 0; r < n; ++r)
          y[i * ldy + r0 + r] += part[static_cast<std::size_t>(i * n + r)];
    }
  });
}

void
CompressedDelta::set_int8_activations(bool on) {
  m_integer_kernel = on && m_integer_capable;
}

std::uint64_t
CompressedDelta::storage_bytes() const {
  return static_cast<std::uint64_t>(m_rows) * (static_cast<std::uint64_t>(m_codes.words) * 4 +
                                               (m_codes.sparse ? static_cast<std::uint64_t>(m_codes.cols) / 8 : 0)) +
         (m_scales.size() + m_int8_offsets.size()) * 4;
}

namespace {

VariantMatrix
load_matrix(const quant::DeltaArtifact& artifact, const std::string& module, std::int64_t rows, std::int64_t cols) {
  VariantMatrix matrix;
  if (const auto own = artifact.find(module + ".weight"); own.info) {
    if (own.shape() != std::vector<std::int64_t>{rows, cols})
      throw InputError(fmt::format("{}: {}.weight is not [{}, {}]", artifact.directory().string(), module, rows, cols));
    matrix.whole = make_owned_dense_weight(own.to_floats(), rows, cols);
    return matrix;
  }
  matrix.delta = CompressedDelta::load(artifact, module, rows, cols);
  return matrix;
}

std::uint64_t
matrix_bytes(const VariantMatrix& m) {
  return m.delta      ? m.delta->storage_bytes()
         : m.low_rank ? m.low_rank->storage_bytes()
         : m.whole    ? m.whole->storage_bytes()
                      : 0;
}

} // namespace

void
DeltaVariant::load_lora(const DecoderWeights& base, const std::filesystem::path& dir,
                        const std::function<void()>& checkpoint) {
  // The base's norms and biases, embedding and LM head; the factors on the modules it targets.
  auto factors = load_lora_adapter(dir, base.config());
  m_tied = &base.lm_head() == &base.embedding();
  m_final_norm = base.final_norm();
  const auto vectors = layer_vectors(base.config());
  const auto take = [&](const std::string& module) {
    VariantMatrix m;
    if (const auto it = factors.find(module); it != factors.end())
      m.low_rank = std::move(it->second);
    return m;
  };
  for (std::int64_t i = 0; i < base.config().num_layers; ++i) {
    if (checkpoint)
      checkpoint();
    const auto p = fmt::format("model.layers.{}.", i);
    const auto& b = base.layer(i);
    VariantLayer l;
    for (const auto& v : vectors)
      l.*v.variant = b.*v.base;
    l.q = take(p + "self_attn.q_proj");
    l.k = take(p + "self_attn.k_proj");
    l.v = take(p + "self_attn.v_proj");
    l.o = take(p + "self_attn.o_proj");
    l.gate = take(p + "mlp.gate_proj");
    l.up = take(p + "mlp.up_proj");
    l.down = take(p + "mlp.down_proj");
    m_layers.push_back(std::move(l));
  }
}

DeltaVariant::DeltaVariant(const DecoderWeights& base, const std::filesystem::path& base_dir,
                           const std::filesystem::path& delta_dir, const std::function<void()>& checkpoint) {
  if (checkpoint)
    checkpoint();
  if (is_lora_adapter(delta_dir)) {
    load_lora(base, delta_dir, checkpoint);
    return;
  }
  m_artifact = std::make_unique<quant::DeltaArtifact>(delta_dir);
  check_delta_base(*m_artifact, base_dir);
  const auto& c = base.config();
  const auto& a = *m_artifact;
  // The delta's own vector where it has one (a gain stored as the checkpoint stores it), else the base's.
  const auto vector = [&](const std::string& name, const std::vector<float>& shared, bool gain) {
    const auto own = a.find(name);
    if (!own.info)
      return shared;
    if (own.element_count() != shared.size())
      throw InputError(fmt::format("{}: {} has {} values, the base {}", a.directory().string(), name,
                                   own.element_count(), shared.size()));
    return gain ? held_gain(own.to_floats(), c) : own.to_floats();
  };
  const auto vectors = layer_vectors(c);
  m_embedding = load_matrix(a, "model.embed_tokens", c.vocab_size, c.hidden_size);
  m_tied = &base.lm_head() == &base.embedding();
  if (!m_tied)
    m_lm_head = load_matrix(a, "lm_head", c.vocab_size, c.hidden_size);
  m_final_norm = vector("model.norm.weight", base.final_norm(), true);
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    if (checkpoint)
      checkpoint();
    const auto p = fmt::format("model.layers.{}.", i);
    const auto& b = base.layer(i);
    VariantLayer l;
    for (const auto& v : vectors)
      l.*v.variant = vector(p + v.name, b.*v.base, v.gain);
    l.q = load_matrix(a, p + "self_attn.q_proj", c.q_dim(), c.hidden_size);
    l.k = load_matrix(a, p + "self_attn.k_proj", c.kv_dim(), c.hidden_size);
    l.v = load_matrix(a, p + "self_attn.v_proj", c.kv_dim(), c.hidden_size);
    l.o = load_matrix(a, p + "self_attn.o_proj", c.hidden_size, c.q_dim());
    l.gate = load_matrix(a, p + "mlp.gate_proj", c.intermediate_size, c.hidden_size);
    l.up = load_matrix(a, p + "mlp.up_proj", c.intermediate_size, c.hidden_size);
    l.down = load_matrix(a, p + "mlp.down_proj", c.hidden_size, c.intermediate_size);
    m_layers.push_back(std::move(l));
  }
}

std::uint64_t
DeltaVariant::resident_bytes() const {
  std::uint64_t total = matrix_bytes(m_embedding) + matrix_bytes(m_lm_head) + m_final_norm.size() * 4;
  for (const auto& l : m_layers) {
    for (const auto* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down})
      total += matrix_bytes(*m);
    for (const auto* v : {&l.input_norm, &l.attention_out_norm, &l.mlp_norm, &l.mlp_out_norm, &l.q_bias, &l.k_bias,
                          &l.v_bias, &l.q_norm, &l.k_norm})
      total += v->size() * 4;
  }
  return total;
}

void
DeltaVariant::set_int8_activations(bool on) {
  for (auto* m : {&m_embedding, &m_lm_head})
    if (m->delta)
      m->delta->set_int8_activations(on);
  for (auto& l : m_layers)
    for (auto* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down})
      if (m->delta)
        m->delta->set_int8_activations(on);
}

void
apply_variant(const VariantMatrix& matrix, const float* x, std::int64_t m, float* y, ThreadPool& pool) {
  if (matrix.whole)
    matrix.whole->multiply(x, m, y, pool); // overwrites the base product on these rows
  else if (matrix.delta)
    matrix.delta->multiply_add(x, m, y, matrix.delta->rows(), pool);
  else if (matrix.low_rank)
    matrix.low_rank->multiply_add(x, m, y, matrix.low_rank->rows(), pool);
}

} // namespace optkit::runtime
