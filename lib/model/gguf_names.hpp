// How llama.cpp's `llama`, `qwen2`, `qwen3` and `qwen3moe` architectures name and lay out a Hugging
// Face model's tensors in GGUF: token_embd, blk.N.attn_norm / attn_q / attn_k / attn_v / attn_q_norm
// / attn_k_norm / attn_output / ffn_norm / ffn_gate / ffn_up / ffn_down, output_norm, output (absent
// when tied to token_embd), each with its .weight or .bias suffix. A mixture-of-experts layer has
// its router as blk.N.ffn_gate_inp and, for each SwiGLU projection, every expert's matrix stacked
// along ggml's third dimension (blk.N.ffn_gate_exps / ffn_up_exps / ffn_down_exps, expert e at
// index e), in place of ffn_gate / ffn_up / ffn_down. In `llama` the Q and K
// projections' rows are permuted within each head: llama.cpp rotates adjacent pairs there (NORM
// RoPE) where transformers rotates halves; qwen2 and qwen3 rotate halves (NEOX), unpermuted.
#pragma once

#include "model/layer_tensors.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optkit::model {

// The GGUF name of an HF tensor; nullopt for a tensor these architectures do not store.
std::optional<std::string> gguf_tensor_name(const std::string& hf_name);
// The HF name of a GGUF tensor; nullopt for a GGUF-only tensor (rope_freqs.weight).
std::optional<std::string> hf_tensor_name(const std::string& gguf_name);

// A mixture-of-experts layer's router and stacked experts (blk.3.ffn_gate_inp.weight,
// blk.3.ffn_down_exps.weight).
std::string gguf_router_name(std::int64_t layer);
std::string gguf_experts_name(std::int64_t layer, ExpertProjection projection);

// A GGUF tensor and the HF weights it holds, in order.
struct GgufSources {
  std::string gguf;
  std::vector<std::string> hf;
};
// A mixture-of-experts layer's: the router, then each projection's experts stacked (expert e at
// index e).
std::vector<GgufSources> gguf_moe_tensors(const ModelConfig& config, std::int64_t layer);

// The layer and projection of a stacked experts tensor's name (blk.3.ffn_down_exps.weight);
// nullopt for any other name.
struct GgufExpertsPlace {
  std::int64_t layer = 0;
  ExpertProjection projection = ExpertProjection::gate;
};
std::optional<GgufExpertsPlace> gguf_experts_place(const std::string& gguf_name);

// Where an expert's HF weight (model.layers.3.block_sparse_moe.experts.5.w2.weight, or
// ...mlp.experts.5.down_proj.weight) sits in GGUF: its stacked tensor and its index there; nullopt
// for any other weight.
struct GgufExpertSlot {
  std::string gguf;
  std::int64_t expert = 0;
};
std::optional<GgufExpertSlot> gguf_expert_slot(const std::string& hf_name);

// Whether GGUF architecture `arch` stores the HF tensor's rows permuted (llama's q_proj, k_proj).
bool gguf_rope_permuted(std::string_view arch, const std::string& hf_name);
// Row `hf_row` of a q_proj / k_proj (heads of `head_dim` rows) sits at this row of the GGUF
// tensor: within its head, HF row p·head_dim/2 + i becomes row 2i + p.
inline std::int64_t
gguf_rope_row(std::int64_t hf_row, std::int64_t head_dim) {
  const std::int64_t head = hf_row / head_dim, within = hf_row % head_dim, half = head_dim / 2;
  return head * head_dim + 2 * (within % half) + within / half;
}

} // namespace optkit::model
