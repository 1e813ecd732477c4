#include "model/random_model.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "model/layer_tensors.hpp"
#include "model/model_config.hpp"
#include "model/safetensors_writer.hpp"
#include "model/weight_store.hpp"

#include <cmath>
#include <cstring>
#include <fmt/format.h>

namespace optkit::model {

namespace {

nlohmann::json
llama_config(std::int64_t hidden, std::int64_t inter, std::int64_t layers, std::int64_t heads, bool tied,
             double factor) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", 128256},
          {"hidden_size", hidden},
          {"intermediate_size", inter},
          {"num_hidden_layers", layers},
          {"num_attention_heads", heads},
          {"num_key_value_heads", 8},
          {"head_dim", hidden / heads},
          {"max_position_embeddings", 131072},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"rope_scaling",
           {{"rope_type", "llama3"},
            {"factor", factor},
            {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0},
            {"original_max_position_embeddings", 8192}}},
          {"tie_word_embeddings", tied},
          {"hidden_act", "silu"},
          {"bos_token_id", 128000},
          {"eos_token_id", 128001}};
}

// xorshift64* with a sum of uniforms: cheap, deterministic, roughly normal.
struct FastNormal {
  std::uint64_t state;
  float next() {
    float sum = 0;
    for (int i = 0; i < 4; ++i) {
      state ^= state >> 12;
      state ^= state << 25;
      state ^= state >> 27;
      sum += static_cast<float>((state * 0x2545F4914F6CDD1DULL) >> 40) / 16777216.0f;
    }
    return (sum - 2.0f) * 1.7320508f; // variance of 4 uniforms is 1/3
  }
};

std::vector<std::byte>
random_tensor(std::uint64_t count, DType dtype, float scale, float offset, std::uint64_t seed) {
  std::vector<std::byte> out(count * dtype_size(dtype));
  FastNormal rng{seed * 0x9E3779B97F4A7C15ULL + 1};
  for (std::uint64_t i = 0; i < count; ++i) {
    const float v = offset + scale * rng.next();
    if (dtype == DType::f32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      const std::uint16_t h = dtype == DType::bf16 ? float_to_bf16(v) : float_to_f16(v);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::string_view
torch_dtype(DType dtype) {
  return dtype == DType::f32 ? "float32" : dtype == DType::bf16 ? "bfloat16" : "float16";
}

// Qwen3-30B-A3B's published config (48 layers of 128 experts, top-8 of width 768).
nlohmann::json
qwen3_moe_config() {
  return {{"architectures", {"Qwen3MoeForCausalLM"}},
          {"model_type", "qwen3_moe"},
          {"vocab_size", 151936},
          {"hidden_size", 2048},
          {"intermediate_size", 6144},
          {"moe_intermediate_size", 768},
          {"num_hidden_layers", 48},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 4},
          {"head_dim", 128},
          {"num_experts", 128},
          {"num_experts_per_tok", 8},
          {"norm_topk_prob", true},
          {"decoder_sparse_step", 1},
          {"mlp_only_layers", nlohmann::json::array()},
          {"max_position_embeddings", 40960},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0},
          {"tie_word_embeddings", false},
          {"hidden_act", "silu"},
          {"bos_token_id", 151643},
          {"eos_token_id", 151645}};
}

} // namespace

nlohmann::json
preset_model_config(const std::string& name) {
  if (name == "llama-3.2-1b")
    return llama_config(2048, 8192, 16, 32, true, 32.0);
  if (name == "llama-3.1-8b")
    return llama_config(4096, 14336, 32, 32, false, 8.0);
  if (name == "qwen3-30b-a3b")
    return qwen3_moe_config();
  throw InputError("unknown model preset '" + name + "' (known: llama-3.2-1b, llama-3.1-8b, qwen3-30b-a3b)");
}

void
write_random_model(const std::filesystem::path& dir, const nlohmann::json& config_json, DType dtype,
                   std::uint64_t seed) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    throw InputError("random models are written in F32, BF16 or F16, not " + std::string(dtype_name(dtype)));
  const auto c = parse_model_config(config_json, "random model config");
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes = {
      {"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}}, {"model.norm.weight", {c.hidden_size}}};
  if (!c.tie_word_embeddings)
    shapes.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}});
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const auto p = fmt::format("model.layers.{}.", i);
    for (const auto& v : layer_vector_specs(c))
      shapes.push_back({p + v.name, {v.size}});
    if (c.fused_projections) { // Phi-3: q/k/v and gate/up each stored as one tensor
      shapes.insert(shapes.end(), {{p + "self_attn.qkv_proj.weight", {c.q_dim() + 2 * c.kv_dim(), c.hidden_size}},
                                   {p + "self_attn.o_proj.weight", {c.hidden_size, c.q_dim()}},
                                   {p + "mlp.gate_up_proj.weight", {2 * c.intermediate_size, c.hidden_size}},
                                   {p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size}}});
      continue;
    }
    shapes.insert(shapes.end(), {{p + "self_attn.q_proj.weight", {c.q_dim(), c.hidden_size}},
                                 {p + "self_attn.k_proj.weight", {c.kv_dim(), c.hidden_size}},
                                 {p + "self_attn.v_proj.weight", {c.kv_dim(), c.hidden_size}},
                                 {p + "self_attn.o_proj.weight", {c.hidden_size, c.q_dim()}}});
    if (c.is_moe_layer(i)) {
      shapes.push_back({router_module(c, i) + ".weight", {c.num_experts, c.hidden_size}});
      for (std::int64_t e = 0; e < c.num_experts; ++e)
        for (const auto which : {ExpertProjection::gate, ExpertProjection::up, ExpertProjection::down}) {
          const auto [rows, cols] = expert_shape(c, which);
          shapes.push_back({expert_module(c, i, e, which) + ".weight", {rows, cols}});
        }
      if (c.shared_expert_intermediate_size > 0) {
        for (const auto which : {ExpertProjection::gate, ExpertProjection::up, ExpertProjection::down}) {
          const auto [rows, cols] = shared_expert_shape(c, which);
          shapes.push_back({shared_expert_module(i, which) + ".weight", {rows, cols}});
        }
        shapes.push_back({shared_expert_gate_module(i) + ".weight", {1, c.hidden_size}});
      }
      continue;
    }
    shapes.insert(shapes.end(), {{p + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}},
                                 {p + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size}},
                                 {p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size}}});
  }
  std::vector<TensorSpec> specs;
  for (const auto& [name, shape] : shapes)
    specs.push_back({name, dtype, shape});
  std::filesystem::create_directories(dir);
  auto config = config_json;
  config["torch_dtype"] = torch_dtype(dtype);
  // One tensor in memory at a time: an 8B-shaped model needs no 16 GB of RAM to be written.
  ShardedSafetensorsWriter writer(dir, specs, std::uint64_t{4} << 30);
  std::uint64_t index = 0;
  for (const auto& spec : specs) {
    // Norm gains of 1 as the architecture stores them (Gemma: w of 1 + w).
    const bool norm = spec.name.ends_with("norm.weight");
    const auto values = random_tensor(spec.byte_size() / dtype_size(dtype), dtype, norm ? 0.0f : 0.02f,
                                      norm ? 1.0f - c.norm_gain_offset : 0.0f, seed + index++);
    writer.write(spec.name, values);
  }
  writer.finish();
  write_file_atomic(dir / "config.json", config.dump(2) + "\n");
}

namespace {

// A matrix's rows in blocks of this many, perturbed and written.
constexpr std::int64_t kFinetuneRowBlock = 256;

std::vector<float>
normal_matrix(std::int64_t rows, std::int64_t cols, float scale, std::uint64_t seed) {
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  FastNormal rng{seed * 0x9E3779B97F4A7C15ULL + 1};
  for (auto& v : out)
    v = scale * rng.next();
  return out;
}

// `name` (rows x cols) plus A B + E, a block of rows at a time.
void
write_perturbed_matrix(const WeightStore& base, const TensorSpec& spec, const FinetunePerturbation& perturbation,
                       std::uint64_t seed, ShardedSafetensorsWriter& writer) {
  const auto rows = spec.shape[0], cols = spec.shape[1], rank = perturbation.rank;
  // Entries of A B sum `rank` products of two N(0, 1): scaled by rms / sqrt(rank) they have RMS rms.
  const auto a = normal_matrix(rows, rank, perturbation.low_rank_rms / std::sqrt(static_cast<float>(rank)), seed);
  const auto b = normal_matrix(rank, cols, 1.0f, seed + 1);
  FastNormal noise{(seed + 2) * 0x9E3779B97F4A7C15ULL + 1};
  for (std::int64_t first = 0; first < rows; first += kFinetuneRowBlock) {
    const auto count = std::min(kFinetuneRowBlock, rows - first);
    auto block = base.rows_as_floats(spec.name, first, count);
    for (std::int64_t r = 0; r < count; ++r) {
      float* row = block.data() + r * cols;
      for (std::int64_t k = 0; k < rank; ++k) {
        const float coefficient = a[static_cast<std::size_t>((first + r) * rank + k)];
        const float* b_row = b.data() + k * cols;
        for (std::int64_t c = 0; c < cols; ++c)
          row[c] += coefficient * b_row[c];
      }
      for (std::int64_t c = 0; c < cols; ++c)
        row[c] += perturbation.noise_rms * noise.next();
    }
    writer.append(spec.name, encode_floats(block, spec.dtype));
  }
}

bool
is_weight_file(const std::filesystem::path& file) {
  const auto name = file.filename().string();
  return name.ends_with(".safetensors") || name == "model.safetensors.index.json";
}

} // namespace

void
write_random_finetune(const std::filesystem::path& base_dir, const std::filesystem::path& out_dir,
                      const FinetunePerturbation& perturbation, std::uint64_t seed) {
  const WeightStore base(base_dir);
  if (base.is_gguf())
    throw InputError(base_dir.string() + ": random fine-tunes are written from a safetensors folder, not a GGUF file");
  if (perturbation.rank < 1)
    throw InputError(fmt::format("a random fine-tune's rank must be at least 1, not {}", perturbation.rank));
  std::vector<TensorSpec> specs;
  for (const auto& name : base.names()) {
    const auto view = base.require(name);
    if (view.shape().size() == 2 && view.dtype() != DType::f32 && view.dtype() != DType::bf16 &&
        view.dtype() != DType::f16)
      throw InputError(fmt::format("{}: {} is {}; random fine-tunes perturb F32, BF16 or F16 matrices",
                                   base_dir.string(), name, dtype_name(view.dtype())));
    specs.push_back({name, view.dtype(), view.shape()});
  }
  std::filesystem::create_directories(out_dir);
  ShardedSafetensorsWriter writer(out_dir, specs, std::uint64_t{4} << 30);
  std::uint64_t index = 0;
  for (const auto& spec : specs) {
    if (spec.shape.size() == 2)
      write_perturbed_matrix(base, spec, perturbation, seed + 3 * index++, writer);
    else
      base.stream(spec.name, [&](std::span<const std::byte> bytes) { writer.append(spec.name, bytes); });
  }
  writer.finish();
  for (const auto& entry : std::filesystem::directory_iterator(base_dir)) // config, tokenizer, chat template
    if (entry.is_regular_file() && !is_weight_file(entry.path()))
      std::filesystem::copy_file(entry.path(), out_dir / entry.path().filename(),
                                 std::filesystem::copy_options::overwrite_existing);
}

} // namespace optkit::model
