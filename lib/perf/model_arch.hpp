// A model's shape as the planner needs it: layer count and widths, attention layout (GQA or
// DeepSeek's multi-head latent attention), and mixture-of-experts routing. From a built-in preset
// or a Hugging Face config.json; no weights are read.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace optkit::perf {

struct ModelArch {
  std::string name;
  std::string architecture; // HF architectures[0]
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int intermediate = 0; // dense FFN width
  int vocab = 0;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  int max_context = 0;

  // Mixture of experts (experts == 0: dense).
  int experts = 0;
  int experts_per_token = 0;
  int moe_intermediate = 0;
  int shared_experts = 0; // each moe_intermediate wide
  int dense_layers = 0;   // leading layers with a dense FFN (DeepSeek first_k_dense_replace)

  // Multi-head latent attention (kv_lora_rank == 0: ordinary attention).
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;

  bool is_moe() const { return experts > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  int moe_layers() const { return is_moe() ? layers - dense_layers : 0; }

  // Parameters of one layer's attention block, of its FFN (dense or one expert), in total.
  double attention_parameters() const;
  double dense_ffn_parameters() const;
  double expert_parameters() const; // one routed expert
  double total_parameters() const;
  double active_parameters() const; // per token (routed experts counted top-k times)
  // KV-cache elements per token per layer (MLA: the shared latent plus the rope key).
  double kv_elements_per_token_per_layer() const;
};

// Names of the built-in presets ("llama-3.1-70b", ...).
std::vector<std::string> model_presets();

// A preset by name (case-insensitive), or a path to a config.json or a folder holding one.
// Unknown → InputError listing the presets; unsupported architecture → InputError listing those.
ModelArch resolve_model(const std::string& name_or_path);

ModelArch parse_hf_config(const std::string& json_text, const std::string& source);

} // namespace optkit::perf
