#include "model/gguf_model.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <utility>

namespace optkit::model {

namespace {

// llama.cpp's names for the split regexes of the byte-level BPE tokenizers it runs (tekken:
// Mistral Nemo; gpt-4o: Phi-4-mini and others), each regex as the tokenizer.json carries it.
constexpr std::array<std::pair<const char*, const char*>, 5> kPreTokenizers = {{
    {"llama-bpe",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"gpt-2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"},
    {"tekken",
     R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"gpt-4o",
     R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
}};

// The llama.cpp architectures optkit runs, and the Hugging Face class each reads as.
// (llama with experts reads as Mixtral.)
constexpr std::array<std::pair<const char*, const char*>, 4> kArchitectures = {{
    {"llama", "LlamaForCausalLM"},
    {"qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "Qwen3ForCausalLM"},
    {"qwen3moe", "Qwen3MoeForCausalLM"},
}};

std::uint32_t
u32_or(const GgufFile& file, const std::string& key, std::uint32_t fallback) {
  return file.find(key) ? file.require_u32(key) : fallback;
}

// An array of strings (tokens, merges) or of integers (token types); InputError naming the key for
// anything else.
const nlohmann::json&
array_value(const GgufFile& file, const std::string& key, bool strings = true) {
  const auto* v = file.find(key);
  if (!v || v->type != GgufValueType::array)
    throw InputError(fmt::format("{}: GGUF metadata has no array '{}'", file.path().string(), key));
  const bool integers = v->element_type == GgufValueType::i32 || v->element_type == GgufValueType::u32 ||
                        v->element_type == GgufValueType::i8 || v->element_type == GgufValueType::u8 ||
                        v->element_type == GgufValueType::i16 || v->element_type == GgufValueType::u16;
  if (strings ? v->element_type != GgufValueType::string : !integers)
    throw InputError(fmt::format("{}: GGUF key '{}' must be an array of {}", file.path().string(), key,
                                 strings ? "strings" : "integers"));
  return v->value;
}

std::optional<std::int64_t>
token_id_key(const GgufFile& file, const std::string& key) {
  if (!file.find(key))
    return std::nullopt;
  return file.require_u32(key);
}

bool
bool_or(const GgufFile& file, const std::string& key, bool fallback) {
  const auto* v = file.find(key);
  return v && v->type == GgufValueType::boolean ? v->value.get<bool>() : fallback;
}

// RoPE scaling the ARCH.rope.scaling.* keys describe (linear), or none; InputError for a kind optkit
// lacks.
nlohmann::json
rope_scaling_json(const GgufFile& file, const std::string& arch) {
  const auto* type = file.find(arch + ".rope.scaling.type");
  const std::string kind = type && type->type == GgufValueType::string ? type->value.get<std::string>() : "none";
  if (kind == "none")
    return nullptr;
  if (kind == "linear")
    return {{"rope_type", "linear"}, {"factor", file.require_f32(arch + ".rope.scaling.factor")}};
  throw InputError(fmt::format("{}: {}.rope.scaling.type {} is not one optkit runs (none, linear; Llama 3's "
                               "scaling travels as rope_freqs.weight)",
                               file.path().string(), arch, kind));
}

// rope_freqs.weight: one F32 divisor per rotary frequency.
std::vector<double>
rope_frequency_factors(const GgufFile& file, std::int64_t rotated_dims) {
  const auto* t = file.find_tensor("rope_freqs.weight");
  if (!t)
    return {};
  if (t->type != GgmlType::f32 || t->element_count() != rotated_dims / 2)
    throw InputError(fmt::format("{}: rope_freqs.weight must be {} F32 values (one per rotary frequency)",
                                 file.path().string(), rotated_dims / 2));
  const auto bytes = file.tensor_bytes(*t);
  std::vector<double> out(static_cast<std::size_t>(rotated_dims / 2));
  for (std::size_t i = 0; i < out.size(); ++i) {
    float v = 0;
    std::memcpy(&v, bytes.data() + i * sizeof(float), sizeof(float));
    if (!(v > 0))
      throw InputError(
          fmt::format("{}: rope_freqs.weight[{}] is {}, not a positive divisor", file.path().string(), i, v));
    out[i] = v;
  }
  return out;
}

// llama.cpp's LLAMA_MAX_EXPERTS.
constexpr std::uint32_t kMaxExperts = 512;

// A mixture of experts' keys (ARCH.expert_count, expert_used_count, expert_feed_forward_length) as
// the Hugging Face config states them: llama with experts is Mixtral; llama.cpp's qwen3moe always
// renormalizes the top-k weights.
void
add_experts(nlohmann::json& config, const GgufFile& file, const std::string& arch) {
  const auto experts = u32_or(file, arch + ".expert_count", 0);
  if (experts == 0)
    return;
  if (experts > kMaxExperts)
    throw InputError(fmt::format("{}: {}.expert_count is {}; llama.cpp runs at most {}", file.path().string(), arch,
                                 experts, kMaxExperts));
  const auto used = file.require_u32(arch + ".expert_used_count");
  config["num_experts_per_tok"] = used;
  if (arch == "llama") {
    config["architectures"] = {"MixtralForCausalLM"};
    config["model_type"] = "mixtral";
    config["num_local_experts"] = experts;
    return;
  }
  config["num_experts"] = experts;
  config["moe_intermediate_size"] = u32_or(file, arch + ".expert_feed_forward_length",
                                           config.at("intermediate_size").get<std::uint32_t>() / std::max(1u, used));
  config["norm_topk_prob"] = true;
}

nlohmann::json
added_token(std::int64_t id, const std::string& content, bool special) {
  return {{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", !special}, {"special", special}};
}

nlohmann::json
template_processing(const std::string& bos, std::int64_t bos_id, bool add_bos, const std::string& eos,
                    std::int64_t eos_id, bool add_eos) {
  nlohmann::json single = nlohmann::json::array(), pair = nlohmann::json::array(), special = nlohmann::json::object();
  auto piece = [](const std::string& token, int type_id) {
    return nlohmann::json{{"SpecialToken", {{"id", token}, {"type_id", type_id}}}};
  };
  auto sequence = [](const char* id, int type_id) {
    return nlohmann::json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
  };
  if (add_bos) {
    single.push_back(piece(bos, 0));
    special[bos] = {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}};
  }
  single.push_back(sequence("A", 0));
  if (add_eos) {
    single.push_back(piece(eos, 0));
    special[eos] = {{"id", eos}, {"ids", {eos_id}}, {"tokens", {eos}}};
  }
  pair = single;
  if (add_bos)
    pair.push_back(piece(bos, 1));
  pair.push_back(sequence("B", 1));
  if (add_eos)
    pair.push_back(piece(eos, 1));
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", special}};
}

} // namespace

bool
is_gguf_model(const std::filesystem::path& path) {
  return std::filesystem::is_regular_file(path) && is_gguf_file(path);
}

std::optional<std::string>
gguf_pre_tokenizer_name(const std::string& split_regex) {
  for (const auto& [name, regex] : kPreTokenizers)
    if (split_regex == regex)
      return name;
  return std::nullopt;
}

std::optional<std::string>
gguf_pre_tokenizer_regex(const std::string& name) {
  for (const auto& [n, regex] : kPreTokenizers)
    if (name == n)
      return regex;
  if (name == "default" || name == "llama3" || name == "llama-v3")
    return name == "default" ? kPreTokenizers[2].second : kPreTokenizers[0].second;
  return std::nullopt;
}

ModelConfig
gguf_model_config(const GgufFile& file) {
  const auto source = file.path().string();
  const auto arch = file.require_string("general.architecture");
  const auto* hf_class =
      std::find_if(kArchitectures.begin(), kArchitectures.end(), [&](const auto& a) { return arch == a.first; });
  if (hf_class == kArchitectures.end())
    throw InputError(
        fmt::format("{}: general.architecture is {}; optkit runs GGUF files of llama.cpp's llama, qwen2, "
                    "qwen3 and qwen3moe architectures (Llama, Mistral, Mixtral, Qwen2, Qwen3 and Qwen3-MoE "
                    "models)",
                    source, arch));
  auto key = [&](const char* name) { return arch + "." + name; };
  // Each layer stores tensors of its own, so a file holds at least as many tensors as layers.
  const auto layers = file.require_u32(key("block_count"));
  if (layers > file.header().tensors.size())
    throw InputError(fmt::format("{}: {} is {}, but the file holds {} tensors", source, key("block_count"), layers,
                                 file.header().tensors.size()));
  const auto heads = file.require_u32(key("attention.head_count"));
  const auto hidden = file.require_u32(key("embedding_length"));
  if (heads == 0 || hidden % heads != 0)
    throw InputError(
        fmt::format("{}: {} {} is not a whole number of {} heads", source, key("embedding_length"), hidden, heads));
  const auto* ff = file.find(key("feed_forward_length"));
  if (ff && ff->type == GgufValueType::array)
    throw InputError(
        fmt::format("{}: {} varies per layer; optkit runs uniform layers", source, key("feed_forward_length")));
  nlohmann::json config = {
      {"architectures", {hf_class->second}},
      {"model_type", arch},
      {"vocab_size",
       u32_or(file, key("vocab_size"), static_cast<std::uint32_t>(array_value(file, "tokenizer.ggml.tokens").size()))},
      {"hidden_size", hidden},
      {"intermediate_size", file.require_u32(key("feed_forward_length"))},
      {"num_hidden_layers", layers},
      {"num_attention_heads", heads},
      {"num_key_value_heads", u32_or(file, key("attention.head_count_kv"), heads)},
      {"head_dim", u32_or(file, key("attention.key_length"), hidden / heads)},
      {"max_position_embeddings", u32_or(file, key("context_length"), 2048)},
      {"rms_norm_eps", file.require_f32(key("attention.layer_norm_rms_epsilon"))},
      {"rope_theta", file.find(key("rope.freq_base")) ? file.require_f32(key("rope.freq_base")) : 10000.0f},
      {"rope_scaling", rope_scaling_json(file, arch)},
      {"tie_word_embeddings", file.find_tensor("output.weight") == nullptr},
      {"torch_dtype", "float32"}};
  add_experts(config, file, arch);
  if (const auto bos = token_id_key(file, "tokenizer.ggml.bos_token_id"))
    config["bos_token_id"] = *bos;
  if (const auto eos = token_id_key(file, "tokenizer.ggml.eos_token_id"))
    config["eos_token_id"] = *eos;
  auto parsed = parse_model_config(config, source);
  if (auto factors = rope_frequency_factors(file, parsed.rotated_dims()); !factors.empty()) {
    if (parsed.rope_scaling)
      throw InputError(fmt::format("{}: both rope_freqs.weight and {}", source, key("rope.scaling.type")));
    RopeScaling scaling;
    scaling.type = "frequency_factors";
    scaling.frequency_factors = std::move(factors);
    parsed.rope_scaling = std::move(scaling);
  }
  return parsed;
}

std::string
gguf_tokenizer_json(const GgufFile& file) {
  const auto source = file.path().string();
  const auto model = file.require_string("tokenizer.ggml.model");
  if (model != "gpt2")
    throw InputError(fmt::format("{}: tokenizer.ggml.model is {}; optkit reads GGUF byte-level BPE vocabularies "
                                 "(gpt2)",
                                 source, model));
  const auto pre = file.find("tokenizer.ggml.pre") ? file.require_string("tokenizer.ggml.pre") : "default";
  const auto regex = gguf_pre_tokenizer_regex(pre);
  if (!regex)
    throw InputError(fmt::format("{}: tokenizer.ggml.pre {} is not a pre-tokenizer optkit knows (llama-bpe, qwen2, "
                                 "gpt-2, tekken, gpt-4o, default)",
                                 source, pre));
  const auto& tokens = array_value(file, "tokenizer.ggml.tokens");
  const auto types = file.find("tokenizer.ggml.token_type") ? array_value(file, "tokenizer.ggml.token_type", false)
                                                            : nlohmann::json::array();
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const auto& text = tokens[id].get_ref<const std::string&>();
    const auto type =
        id < types.size() ? types[id].get<std::int32_t>() : static_cast<std::int32_t>(GgufTokenType::normal);
    if (type == static_cast<std::int32_t>(GgufTokenType::control) ||
        type == static_cast<std::int32_t>(GgufTokenType::user_defined))
      added.push_back(
          added_token(static_cast<std::int64_t>(id), text, type == static_cast<std::int32_t>(GgufTokenType::control)));
    else
      vocab[text] = id;
  }
  const auto bos_id = token_id_key(file, "tokenizer.ggml.bos_token_id");
  const auto eos_id = token_id_key(file, "tokenizer.ggml.eos_token_id");
  // llama.cpp adds BOS by default for llama-bpe vocabularies; the key overrides it.
  const bool add_bos = bos_id && bool_or(file, "tokenizer.ggml.add_bos_token", pre == "llama-bpe");
  const bool add_eos = eos_id && bool_or(file, "tokenizer.ggml.add_eos_token", false);
  auto token_at = [&](std::optional<std::int64_t> id) {
    if (!id || *id < 0 || static_cast<std::size_t>(*id) >= tokens.size())
      return std::string();
    return tokens[static_cast<std::size_t>(*id)].get<std::string>();
  };
  if ((add_bos && token_at(bos_id).empty()) || (add_eos && token_at(eos_id).empty()))
    throw InputError(
        fmt::format("{}: tokenizer.ggml.bos_token_id / eos_token_id is not a token of the vocabulary", source));
  nlohmann::json doc = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", *regex}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
      {"post_processor", add_bos || add_eos ? template_processing(token_at(bos_id), bos_id.value_or(0), add_bos,
                                                                  token_at(eos_id), eos_id.value_or(0), add_eos)
                                            : nlohmann::json(nullptr)},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", pre == "llama-bpe"}, // as llama.cpp runs Llama 3 vocabularies
        {"vocab", vocab},
        {"merges",
         file.find("tokenizer.ggml.merges") ? array_value(file, "tokenizer.ggml.merges") : nlohmann::json::array()}}}};
  return doc.dump();
}

std::string
describe_gguf_quantization(const GgufFile& file) {
  std::map<std::string, int> counts;
  for (const auto& t : file.header().tensors)
    ++counts[std::string(ggml_type_name(t.type))];
  std::vector<std::string> parts;
  for (const auto& [type, count] : counts)
    parts.push_back(fmt::format("{} {}", count, type));
  const auto* file_type = file.find("general.file_type");
  const auto* dataset = file.find("quantize.imatrix.dataset");
  return fmt::format(
      "GGUF {}: {} tensors; {}",
      file_type ? fmt::format("{} (general.file_type {})", gguf_file_type_name(file.require_u32("general.file_type")),
                              file.require_u32("general.file_type"))
                : std::string("without general.file_type"),
      fmt::join(parts, " + "),
      dataset && dataset->type == GgufValueType::string ? "importance matrix from " + dataset->value.get<std::string>()
                                                        : std::string("no importance matrix recorded"));
}

std::optional<std::string>
gguf_chat_template(const GgufFile& file) {
  const auto* v = file.find("tokenizer.chat_template");
  if (!v || v->type != GgufValueType::string)
    return std::nullopt;
  return v->value.get<std::string>();
}

nlohmann::ordered_json
gguf_special_tokens(const GgufFile& file) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  const auto& tokens = array_value(file, "tokenizer.ggml.tokens");
  for (const auto& [key, name] :
       {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"}, std::pair{"tokenizer.ggml.eos_token_id", "eos_token"}}) {
    const auto id = token_id_key(file, key);
    if (id && static_cast<std::size_t>(*id) < tokens.size())
      out[name] = tokens[static_cast<std::size_t>(*id)];
  }
  return out;
}

} // namespace optkit::model
