#include "perf/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace optkit::perf {

namespace {

// One data-parallel rank's share of a step: tokens through the linear layers, rows through the LM head.
struct RankRows {
  double tokens = 0;
  double logits = 0;
};

RankRows
rank_rows(const StepShape& s, double dp_share) {
  return {(s.prefill_requests * s.prefill_tokens + s.decode_requests * s.tokens_per_decode) * dp_share,
          (s.prefill_requests + s.decode_requests * s.tokens_per_decode) * dp_share};
}

} // namespace

std::string
ParallelConfig::label(bool moe) const {
  std::string text = "tp" + std::to_string(tp);
  if (moe)
    text += "dp" + std::to_string(dp) + "ep" + std::to_string(ep);
  return text + "pp" + std::to_string(pp);
}

double
expert_parallel_imbalance(int experts, int ep, double alpha) {
  if (ep <= 1 || experts <= 1 || alpha <= 0)
    return 1.0;
  // Eq. 3 with x_min = 1, x_max = experts, U at the quantiles (i + 0.5) / E.
  std::vector<double> load(std::size_t(experts), 0.0);
  const double x_min = 1.0, x_max = double(experts);
  for (int i = 0; i < experts; ++i) {
    const double u = (i + 0.5) / experts;
    if (std::abs(alpha - 1.0) < 1e-9)
      load[std::size_t(i)] = x_min * std::pow(x_max / x_min, u);
    else {
      const double a = std::pow(x_max, 1 - alpha), b = std::pow(x_min, 1 - alpha);
      load[std::size_t(i)] = std::pow((a - b) * u + b, 1 / (1 - alpha));
    }
  }
  // Which experts are hot is unrelated to where they are placed: a fixed shuffle, then contiguous
  // blocks of experts / ep per rank, as engines place them without load balancing.
  std::mt19937 shuffle_rng(12345);
  std::shuffle(load.begin(), load.end(), shuffle_rng);
  const int per_rank = experts / ep;
  double total = 0, hottest = 0;
  for (int rank = 0; rank < ep; ++rank) {
    const double rank_load = std::accumulate(load.begin() + rank * per_rank, load.begin() + (rank + 1) * per_rank, 0.0);
    total += rank_load;
    hottest = std::max(hottest, rank_load);
  }
  return hottest / (total / ep);
}

std::string
step_part_name(StepPart part) {
  switch (part) {
  case StepPart::gemm:
    return "gemm";
  case StepPart::attention:
    return "attention";
  case StepPart::communication:
    return "communication";
  case StepPart::moe:
    return "moe";
  case StepPart::memory:
    return "memory";
  }
  return "?";
}

StepParts&
StepParts::operator+=(const StepParts& other) {
  for (std::size_t i = 0; i < kStepParts; ++i)
    parts[i] += other.parts[i];
  return *this;
}

StepParts
StepParts::scaled(double factor) const {
  StepParts out;
  for (std::size_t i = 0; i < kStepParts; ++i)
    out.parts[i] = parts[i].scaled(factor);
  return out;
}

Estimate
StepParts::total() const {
  Estimate sum;
  for (const Estimate& part : parts)
    sum += part;
  return sum;
}

StepShape
equivalent_shape(const StepBatch& batch) {
  StepShape shape;
  shape.tokens_per_decode = batch.tokens_per_decode;
  if (!batch.prefills.empty()) {
    double tokens = 0, attention_work = 0;
    for (const SequenceWork& s : batch.prefills) {
      tokens += s.new_tokens;
      attention_work += s.new_tokens * (s.cached_tokens + (s.new_tokens + 1.0) / 2.0);
    }
    shape.prefill_requests = double(batch.prefills.size());
    shape.prefill_tokens = tokens / shape.prefill_requests;
    // n̄·(prefix + (n̄ + 1)/2) = mean attention work; ≥ 0 since the mean of squares ≥ the square of the mean.
    if (shape.prefill_tokens > 0)
      shape.prefix = std::max(0.0, attention_work / tokens - (shape.prefill_tokens + 1.0) / 2.0);
  }
  if (!batch.decode_kv_lens.empty()) {
    shape.decode_requests = double(batch.decode_kv_lens.size());
    shape.kv_len =
        std::accumulate(batch.decode_kv_lens.begin(), batch.decode_kv_lens.end(), 0.0) / shape.decode_requests;
  }
  return shape;
}

StepModel::StepModel(const ModelArch& model, const SystemSpec& system, const PerfDatabase& db, ParallelConfig parallel,
                     ServingPrecision precision, double moe_power_law_alpha, AttentionKernels attention_kernels)
    : m_model(model)
    , m_system(system)
    , m_db(db)
    , m_parallel(parallel)
    , m_precision(precision)
    , m_gemm_kind(gemm_kind(precision.weights, precision.activations))
    , m_kv_dtype(precision_name(precision.kv_cache))
    , m_engine_kernels(attention_kernels
                           ? std::optional(system.efficiency.attention_of(engine_name(*attention_kernels)))
                           : std::nullopt) {
  if (model.is_moe())
    m_imbalance = expert_parallel_imbalance(model.experts, parallel.ep, moe_power_law_alpha);
}

StepModel::LinearMemo
StepModel::linear_part(double t, double logit_rows) const {
  {
    const std::lock_guard lock(m_memo_mutex);
    for (const auto& memo : m_memo)
      if (memo.tokens == t && memo.logit_rows == logit_rows)
        return memo;
  }
  // Priced outside the lock: two threads may both price a new token count; both get the same.
  const LinearMemo memo = price_linear_part(t, logit_rows);
  const std::lock_guard lock(m_memo_mutex);
  m_memo[m_memo_next] = memo;
  m_memo_next = (m_memo_next + 1) % m_memo.size();
  return memo;
}

StepModel::LinearMemo
StepModel::price_linear_part(double t, double logit_rows) const {
  LinearMemo memo;
  memo.tokens = t;
  memo.logit_rows = logit_rows;

  const ModelArch& m = m_model;
  const ParallelConfig& p = m_parallel;
  const double tp = p.tp;
  const int attention_gpus = p.tp;
  const double act_bytes = bytes_per_element(m_precision.activations) >= 2 ? 2.0 : 1.0;
  const double kv_local = std::max(1.0, m.kv_heads / tp); // KV heads per rank (replicated past TP = KV heads)
  StepParts attention_block;
  Estimate& projections = attention_block[StepPart::gemm];
  if (m.is_mla()) {
    const double heads_local = m.heads / tp;
    const double qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    if (m.q_lora_rank > 0) {
      projections += m_db.gemm(m_gemm_kind, t, m.q_lora_rank, m.hidden);
      projections += m_db.gemm(m_gemm_kind, t, heads_local * qk, m.q_lora_rank);
    } else {
      projections += m_db.gemm(m_gemm_kind, t, heads_local * qk, m.hidden);
    }
    projections += m_db.gemm(m_gemm_kind, t, m.kv_lora_rank + m.qk_rope_head_dim, m.hidden);
    projections += m_db.gemm(m_gemm_kind, t, m.hidden, heads_local * m.v_head_dim);
  } else {
    projections += m_db.gemm(m_gemm_kind, t, (m.heads / tp + 2 * kv_local) * m.head_dim, m.hidden);
    projections += m_db.gemm(m_gemm_kind, t, m.hidden, m.heads / tp * m.head_dim);
  }
  const double hidden_bytes = t * m.hidden * 2.0;
  attention_block[StepPart::communication] += m_db.collective(CollectiveOp::all_reduce, attention_gpus, hidden_bytes);
  // The memory-bound kernels around attention, one table lookup each so that each pays its launch
  // (what dominates them at small batches): the fused residual-add + RMSNorm (reads the hidden
  // state and the residual, writes both), the rotary embedding over Q and K, and the write of the
  // new K and V into the cache.
  const double q_width =
      m.is_mla() ? m.heads / tp * (m.qk_nope_head_dim + m.qk_rope_head_dim) : m.heads / tp * m.head_dim;
  const double kv_width = m.is_mla() ? m.kv_lora_rank + m.qk_rope_head_dim : kv_local * m.head_dim;
  Estimate& glue = attention_block[StepPart::memory];
  glue += m_db.memory(hidden_bytes * 4);
  glue += m_db.memory(t * (q_width + kv_width) * 2.0 * 2);
  glue += m_db.memory(t * kv_width * (m.is_mla() ? 1 : 2) * 2.0);

  if (!m.is_moe() || m.dense_layers > 0) {
    const double inter_local = m.intermediate / tp;
    StepParts& layer = memo.dense_layer;
    layer = attention_block;
    layer[StepPart::gemm] += m_db.gemm(m_gemm_kind, t, 2 * inter_local, m.hidden);
    layer[StepPart::gemm] += m_db.gemm(m_gemm_kind, t, m.hidden, inter_local);
    layer[StepPart::communication] += m_db.collective(CollectiveOp::all_reduce, attention_gpus, hidden_bytes);
    layer[StepPart::memory] += m_db.memory(hidden_bytes * 4);          // residual-add + RMSNorm
    layer[StepPart::memory] += m_db.memory(t * inter_local * 2.0 * 3); // SiLU(gate) · up
  }
  if (m.is_moe()) {
    StepParts& layer = memo.moe_layer;
    layer = attention_block;
    layer[StepPart::memory] += m_db.memory(hidden_bytes * 4);           // residual-add + RMSNorm
    layer[StepPart::gemm] += m_db.gemm("bf16", t, m.experts, m.hidden); // router
    const double worker_tokens = t * p.dp;
    if (p.ep > 1 || p.dp > 1) {
      const double routed_bytes = t * m.experts_per_token * m.hidden;
      layer[StepPart::moe] += m_db.collective(CollectiveOp::all_to_all, p.tp * p.dp, routed_bytes * act_bytes);
      layer[StepPart::moe] += m_db.collective(CollectiveOp::all_to_all, p.tp * p.dp, routed_bytes * 2.0);
    }
    layer[StepPart::moe] += m_db.moe(m_gemm_kind, m.hidden, m.moe_intermediate / p.moe_tp(), m.experts_per_token,
                                     m.experts / p.ep, worker_tokens / p.ep, m_imbalance);
    if (m.shared_experts > 0) {
      const double shared_local = double(m.shared_experts) * m.moe_intermediate / tp;
      layer[StepPart::gemm] += m_db.gemm(m_gemm_kind, t, 2 * shared_local, m.hidden);
      layer[StepPart::gemm] += m_db.gemm(m_gemm_kind, t, m.hidden, shared_local);
    }
    if (p.moe_tp() > 1)
      layer[StepPart::communication] += m_db.collective(CollectiveOp::all_reduce, p.moe_tp(), hidden_bytes);
  }
  // LM head (vocabulary split over TP) on the rows that need logits, and the embedding gather.
  memo.head[StepPart::gemm] = m_db.gemm("bf16", std::max(1.0, logit_rows), m.vocab / tp, m.hidden);
  memo.head[StepPart::memory] = m_db.memory(hidden_bytes);
  return memo;
}

Estimate
StepModel::attention(const StepShape& s, double dp_share) const {
  const ModelArch& m = m_model;
  const double tp = m_parallel.tp;
  Estimate total;
  if (m.is_mla()) {
    const double heads_local = m.heads / tp;
    const double qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    if (s.prefill_requests > 0) {
      // Prefill decompresses the latent into per-head keys and values, then runs ordinary attention.
      const double tokens = s.prefill_requests * dp_share * (s.prefill_tokens + s.prefix);
      total += m_db.gemm(m_gemm_kind, tokens, heads_local * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank);
      total += prefill_attention(int(heads_local), int(heads_local), int(qk), s.prefill_requests * dp_share,
                                 s.prefill_tokens, s.prefix);
    }
    if (s.decode_requests > 0) {
      // Decode absorbs the up-projections and attends over the shared latent cache.
      const double rows = s.decode_requests * dp_share * s.tokens_per_decode;
      total += m_db.gemm("bf16", rows * heads_local, m.kv_lora_rank, m.qk_nope_head_dim);
      const double latent = m.kv_lora_rank + m.qk_rope_head_dim;
      const OpCost cost =
          attention_decode_cost(s.decode_requests * dp_share, s.kv_len, heads_local, latent, m.kv_lora_rank, latent,
                                bytes_per_element(m_precision.kv_cache), s.tokens_per_decode);
      total += m_engine_kernels
                   ? engine_attention(OpClass::decode_attention, cost)
                   : roofline_estimate(m_system, OpClass::decode_attention, cost, m_system.peak_flops("bf16"));
      total += m_db.gemm("bf16", rows * heads_local, m.v_head_dim, m.kv_lora_rank);
    }
    return total;
  }
  const int heads_local = std::max(1, int(m.heads / tp));
  const int kv_local = std::max(1, int(m.kv_heads / tp));
  if (s.prefill_requests > 0)
    total +=
        prefill_attention(heads_local, kv_local, m.head_dim, s.prefill_requests * dp_share, s.prefill_tokens, s.prefix);
  if (s.decode_requests > 0)
    total += decode_attention(heads_local, kv_local, m.head_dim, s.decode_requests * dp_share, s.kv_len,
                              s.tokens_per_decode);
  return total;
}

Estimate
StepModel::prefill_attention(int heads, int kv_heads, int head_dim, double requests, double tokens,
                             double prefix) const {
  if (!m_engine_kernels)
    return m_db.attention_prefill(m_kv_dtype, heads, kv_heads, head_dim, requests, tokens, prefix);
  return engine_attention(OpClass::attention,
                          attention_prefill_cost(requests, tokens, prefix, heads, kv_heads, head_dim, head_dim,
                                                 bytes_per_element(m_precision.kv_cache)));
}

Estimate
StepModel::decode_attention(int heads, int kv_heads, int head_dim, double requests, double kv_len,
                            int tokens_per_decode) const {
  if (!m_engine_kernels)
    return m_db.attention_decode(m_kv_dtype, heads, kv_heads, head_dim, requests, kv_len, tokens_per_decode);
  return engine_attention(OpClass::decode_attention,
                          attention_decode_cost(requests, kv_len, heads, head_dim, head_dim, 2.0 * kv_heads * head_dim,
                                                bytes_per_element(m_precision.kv_cache), tokens_per_decode));
}

Estimate
StepModel::engine_attention(OpClass op_class, const OpCost& cost) const {
  return engine_attention_estimate(m_system, *m_engine_kernels, op_class, cost, m_system.peak_flops("bf16"));
}

StepParts
StepModel::step_parts(const StepShape& s) const {
  const ModelArch& m = m_model;
  const ParallelConfig& p = m_parallel;
  const double dp_share = 1.0 / p.dp;
  const RankRows rows = rank_rows(s, dp_share);
  const double tokens_per_rank = rows.tokens;
  const LinearMemo linear = linear_part(tokens_per_rank, rows.logits);
  const Estimate attention_per_layer = attention(s, dp_share);

  const double dense_layers = m.is_moe() ? m.dense_layers : m.layers;
  StepParts total;
  StepParts dense = linear.dense_layer;
  dense[StepPart::attention] += attention_per_layer;
  total += dense.scaled(dense_layers);
  if (m.is_moe()) {
    StepParts moe = linear.moe_layer;
    moe[StepPart::attention] += attention_per_layer;
    total += moe.scaled(m.moe_layers());
  }
  total += linear.head;
  if (p.pp > 1)
    total[StepPart::communication] +=
        m_db.collective(CollectiveOp::p2p, p.gpus(), tokens_per_rank * m.hidden * 2.0).scaled(p.pp - 1);
  return total;
}

Estimate
StepModel::decoder_layer(const StepShape& s) const {
  const RankRows rows = rank_rows(s, 1.0 / m_parallel.dp);
  Estimate layer = linear_part(rows.tokens, rows.logits).dense_layer.total();
  layer += attention(s, 1.0 / m_parallel.dp);
  return layer;
}

Estimate
StepModel::lm_head(const StepShape& s) const {
  const RankRows rows = rank_rows(s, 1.0 / m_parallel.dp);
  return linear_part(rows.tokens, rows.logits).head.total();
}

StepShape
StepModel::decode_shape(double batch, double kv_len, int tokens_per_decode) const {
  const double micro_batch = m_parallel.pp > 1 ? std::max(1.0, batch / m_parallel.pp) : batch;
  StepShape shape;
  shape.decode_requests = micro_batch;
  shape.kv_len = kv_len;
  shape.tokens_per_decode = tokens_per_decode;
  return shape;
}

} // namespace optkit::perf
