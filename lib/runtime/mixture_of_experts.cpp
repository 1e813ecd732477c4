// A mixture-of-experts MLP (Mixtral, Qwen2-MoE, Qwen3-MoE): each row's router logits go through a softmax
// (fp32), its top-k experts are kept (their weights renormalized to sum to 1 where the config says
// so), and each expert multiplies the rows routed to it at once: an expert's weights are read once
// per pass whatever the batch, and an expert no row chose is not read at all. Qwen2-MoE adds a
// shared expert on every row, scaled by the sigmoid of its own gate.
#include "runtime/decoder_pass.hpp"
#include "runtime/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace optkit::runtime {

namespace {

// The indices of the k largest `probabilities` (ties to the lower index), largest first.
void
top_experts(const float* probabilities, std::int64_t experts, std::int64_t k, std::vector<std::int64_t>& order) {
  order.resize(static_cast<std::size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int64_t a, std::int64_t b) {
    return probabilities[a] > probabilities[b] || (probabilities[a] == probabilities[b] && a < b);
  });
  order.resize(static_cast<std::size_t>(k));
}

void
softmax_in_place(float* v, std::int64_t n) {
  const float top = *std::max_element(v, v + n);
  float sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    v[i] = std::exp(v[i] - top);
    sum += v[i];
  }
  for (std::int64_t i = 0; i < n; ++i)
    v[i] /= sum;
}

} // namespace

void
DecoderPass::mixture_of_experts(std::int64_t index, const float* h, std::int64_t rows, float* out, ActivationTap* tap) {
  const auto& layer = m_weights->layer(index);
  const auto& c = m_weights->config();
  ThreadPool& pool = *m_pool;
  const auto experts = c.num_experts, k = c.experts_per_token, hidden = c.hidden_size,
             inter = c.expert_intermediate_size;

  // Route: each row's top-k experts and their weights.
  float* logits = m_router_logits.get(static_cast<std::size_t>(rows * experts));
  layer.router->multiply(h, rows, logits, pool);
  // Each row's k (expert, weight) choices, in buffers kept from pass to pass (a decode step
  // allocates nothing once the largest batch has been seen).
  auto& chosen = m_chosen;
  auto& weight = m_chosen_weight;
  auto& order = m_expert_order;
  chosen.resize(static_cast<std::size_t>(rows * k));
  weight.resize(chosen.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    float* p = logits + r * experts;
    softmax_in_place(p, experts);
    top_experts(p, experts, k, order);
    float total = 0;
    for (std::int64_t j = 0; j < k; ++j)
      total += p[order[static_cast<std::size_t>(j)]];
    for (std::int64_t j = 0; j < k; ++j) {
      const auto e = order[static_cast<std::size_t>(j)];
      chosen[static_cast<std::size_t>(r * k + j)] = e;
      weight[static_cast<std::size_t>(r * k + j)] = c.normalize_expert_weights ? p[e] / total : p[e];
    }
  }

  if (tap)
    tap->observe_routing(h, rows, hidden, chosen, k);

  // Group the (row, weight) pairs by expert (a counting sort, rows ascending within an expert).
  m_expert_first.assign(static_cast<std::size_t>(experts + 1), 0);
  for (const auto e : chosen)
    ++m_expert_first[static_cast<std::size_t>(e + 1)];
  std::partial_sum(m_expert_first.begin(), m_expert_first.end(), m_expert_first.begin());
  m_routes.resize(chosen.size());
  auto& next = m_expert_next;
  next.assign(m_expert_first.begin(), m_expert_first.end() - 1);
  for (std::size_t i = 0; i < chosen.size(); ++i)
    m_routes[static_cast<std::size_t>(next[static_cast<std::size_t>(chosen[i])]++)] = {static_cast<std::int64_t>(i) / k,
                                                                                       weight[i]};

  // Each chosen expert over its rows, added into `out` with its weight.
  auto& counts = m_expert_counts;
  counts.rows.resize(static_cast<std::size_t>(c.num_layers * experts));
  counts.calls.resize(counts.rows.size());
  std::fill(out, out + rows * hidden, 0.0f);
  for (std::int64_t e = 0; e < experts; ++e) {
    const auto first = m_expert_first[static_cast<std::size_t>(e)];
    const auto n = m_expert_first[static_cast<std::size_t>(e + 1)] - first;
    if (n == 0)
      continue;
    float* in = m_expert_in.get(static_cast<std::size_t>(n * hidden));
    for (std::int64_t i = 0; i < n; ++i)
      std::copy_n(h + m_routes[static_cast<std::size_t>(first + i)].row * hidden, hidden, in + i * hidden);
    const float* down = run_expert(layer.experts[static_cast<std::size_t>(e)], e, in, n, inter, tap);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto& route = m_routes[static_cast<std::size_t>(first + i)];
      float* o = out + route.row * hidden;
      for (std::int64_t d = 0; d < hidden; ++d)
        o[d] += route.weight * down[i * hidden + d];
    }
    const auto slot = static_cast<std::size_t>(index * experts + e);
    counts.rows[slot] += n;
    ++counts.calls[slot];
  }
  if (!layer.shared_expert_gate)
    return;
  // Qwen2-MoE's shared expert on every row, scaled by sigmoid(h·g).
  const float* shared = run_expert(layer.shared_expert, kSharedExpert, h, rows, c.shared_expert_intermediate_size, tap);
  float* gate = m_router_logits.get(static_cast<std::size_t>(rows));
  layer.shared_expert_gate->multiply(h, rows, gate, pool);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float scale = 1.0f / (1.0f + std::exp(-gate[r]));
    for (std::int64_t d = 0; d < hidden; ++d)
      out[r * hidden + d] += scale * shared[r * hidden + d];
  }
}

const float*
DecoderPass::run_expert(const DecoderLayerWeights::Expert& expert, std::int64_t index, const float* in, std::int64_t n,
                        std::int64_t width, ActivationTap* tap) {
  const auto& c = m_weights->config();
  ThreadPool& pool = *m_pool;
  float* gate = m_gate.get(static_cast<std::size_t>(n * width));
  float* up = m_up.get(static_cast<std::size_t>(n * width));
  float* down = m_expert_out.get(static_cast<std::size_t>(n * c.hidden_size));
  if (tap)
    tap->observe_expert(index, LinearInput::mlp_in, in, n, c.hidden_size);
  expert.gate->multiply(in, n, gate, pool);
  expert.up->multiply(in, n, up, pool);
  pool.parallel_for(n, [&](std::int64_t a, std::int64_t b) {
    gated_activation(c.activation, gate + a * width, up + a * width, (b - a) * width);
  });
  if (tap)
    tap->observe_expert(index, LinearInput::mlp_hidden, gate, n, width);
  expert.down->multiply(gate, n, down, pool);
  return down;
}

} // namespace optkit::runtime
