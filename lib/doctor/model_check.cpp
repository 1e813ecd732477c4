#include "doctor/model_check.hpp"

#include "core/error.hpp"
#include "model/chat_template.hpp"
#include "model/gguf_model.hpp"
#include "model/memory_needs.hpp"
#include "model/model_config.hpp"
#include "model/tokenizer.hpp"
#include "model/weight_store.hpp"
#include "quant/compressed_tensors.hpp"
#include "runtime/decoder_pass.hpp"
#include "runtime/device_engine.hpp"
#include "runtime/weight_loader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace optkit::doctor {

namespace {

constexpr std::string_view kSample = "Hello, world! Numbers 12345, caf\u00e9 \u4e2d\u6587 \U0001F600 and  spaces.\n";

std::string
list_or_none(const std::vector<std::string>& names) {
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, " + "));
}

// The first `n` characters of a rendering, with newlines shown as \n, for a one-line detail.
std::string
preview(const std::string& text, std::size_t n = 160) {
  std::string out;
  for (const char c : text.substr(0, n))
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return text.size() > n ? out + "..." : out;
}

// Peak resident memory of compress (model/memory_needs.hpp) and of running the model: its
// weights are mapped and all touched, its KV cache (fp32 keys and values) comes on top.
std::string
memory_needs(const std::filesystem::path& model_dir, const model::ModelConfig& config) {
  const model::WeightStore store(model_dir);
  const auto kv_per_token = 2 * static_cast<std::uint64_t>(config.num_layers * config.kv_dim()) * sizeof(float);
  if (store.is_gguf())
    return fmt::format("eval and serve-deltas: {} of weights mapped + {} of KV cache per 1,000 tokens",
                       model::gigabytes(store.file_bytes()), model::gigabytes(kv_per_token * 1000));
  model::CompressWork work;
  work.mlp_block_tokens = runtime::kMlpRowBlock;
  work.weight_bytes = model::dtype_size(store.float_dtype());
  const auto rtn = model::compress_memory_needs(config, work);
  work.calibration_tokens = 512 * 512;
  work.hessians = true;
  const auto gptq = model::compress_memory_needs(config, work);
  return fmt::format("compress: RTN/FP8 {}, GPTQ at 512 x 512 calibration tokens {} ({} with the states spilled "
                     "under --max-memory); eval and serve-deltas: {} of weights mapped + {} of KV cache per 1,000 "
                     "tokens",
                     model::gigabytes(rtn.total(false)), model::gigabytes(gptq.total(false)),
                     model::gigabytes(gptq.total(true)), model::gigabytes(store.file_bytes()),
                     model::gigabytes(kv_per_token * 1000));
}

// What optkit does with a model of this architecture.
std::string
supported_uses(const std::filesystem::path& model_dir, const model::ModelConfig& config) {
  if (model::is_gguf_model(model_dir))
    return "eval (perplexity, tasks) and serve-deltas (the model alone: deltas and LoRA adapters apply to "
           "Hugging Face folders) on the CPU; compress reads Hugging Face folders";
  const auto device_gap = runtime::DeviceEngine::unsupported(config);
  const bool moe = config.num_experts > 0;
  const auto compress = moe                        ? "compress (every recipe, per expert; not compress delta yet)"
                        : config.fused_projections ? "compress (every recipe, the fused modules whole; not compress "
                                                     "delta yet)"
                                                   : "compress (every recipe, compress delta)";
  const auto serve = moe                        ? "serve-deltas with deltas and LoRA adapters (attention only)"
                     : config.fused_projections ? "serve-deltas (no deltas or LoRA on fused modules yet)"
                                                : "serve-deltas with deltas and LoRA adapters";
  return fmt::format("eval (perplexity, tasks), {}, {} on the CPU; on CUDA {}", compress, serve,
                     device_gap.empty() ? "too" : "not yet (the device decoder lacks " + device_gap + ")");
}

} // namespace

std::vector<Check>
check_model_folder(const std::filesystem::path& model_dir) {
  std::vector<Check> checks;
  try {
    const auto config = model::load_model_config(model_dir);
    checks.push_back({"model config", CheckStatus::ok,
                      fmt::format("{}: {}, vocabulary {}", config.architecture_name, model::describe_features(config),
                                  config.vocab_size)});
    checks.push_back({"model support", CheckStatus::ok, supported_uses(model_dir, config)});
    try {
      checks.push_back({"memory needs", CheckStatus::ok, memory_needs(model_dir, config)});
    } catch (const InputError& e) { // weights unreadable: said once, here
      checks.push_back({"memory needs", CheckStatus::fail, e.what()});
    }
  } catch (const InputError& e) {
    checks.push_back({"model config", CheckStatus::fail, e.what()});
  }
  try {
    if (model::is_gguf_model(model_dir)) {
      checks.push_back(
          {"quantization", CheckStatus::ok, model::describe_gguf_quantization(model::GgufFile(model_dir))});
    } else {
      const auto quantization = runtime::load_quantization_config(model_dir);
      checks.push_back({"quantization", CheckStatus::ok,
                        quantization ? quant::describe(*quantization) : "none: the weights are as they were trained"});
    }
  } catch (const InputError& e) {
    checks.push_back({"quantization", CheckStatus::fail, e.what()});
  }

  std::optional<model::Tokenizer> tokenizer;
  try {
    tokenizer = model::Tokenizer::load_folder(model_dir);
    const auto c = tokenizer->components();
    checks.push_back(
        {"tokenizer", CheckStatus::ok,
         fmt::format("model {}; normalizer {}; pre-tokenizer {}; post-processor {}; decoder {}; "
                     "{} tokens ({} added, {} special)",
                     c.model, list_or_none(c.normalizer), list_or_none(c.pre_tokenizer), list_or_none(c.post_processor),
                     list_or_none(c.decoder), tokenizer->vocab_size(), c.added_tokens, c.special_tokens)});
    const auto ids = tokenizer->encode(kSample, false);
    const auto with_special = tokenizer->encode(kSample, true);
    const auto decoded = tokenizer->decode(ids);
    const bool round_trip = decoded == kSample;
    checks.push_back({"tokenizer sample", round_trip ? CheckStatus::ok : CheckStatus::warn,
                      fmt::format("{} bytes -> {} tokens ({} with special tokens); decode {}", kSample.size(),
                                  ids.size(), with_special.size(),
                                  round_trip ? "round-trips"
                                             : "differs: \"" + preview(decoded) +
                                                   "\" (a normalizer or decoder that drops information)")});
  } catch (const InputError& e) {
    checks.push_back({"tokenizer", CheckStatus::fail, e.what()});
  }

  try {
    const auto chat = model::load_chat_template(model_dir);
    std::vector<std::string> specials;
    for (const auto& [key, value] : chat.special_tokens.items()) {
      std::string entry = key + "=" + value.get<std::string>();
      if (tokenizer) {
        const auto id = tokenizer->token_id(value.get<std::string>());
        entry += id ? fmt::format(" ({})", *id) : std::string(" (NOT a token)");
      }
      specials.push_back(entry);
    }
    checks.push_back({"special tokens", CheckStatus::ok, list_or_none(specials)});
    const std::vector<model::ChatMessage> sample{{"system", "You are a helpful assistant."}, {"user", "Hi!"}};
    const auto rendered = model::render_chat(chat, sample, true);
    std::string detail = fmt::format(
        "{}{}: ", chat.source, chat.names.empty() ? "" : fmt::format(" (templates: {})", fmt::join(chat.names, ", ")));
    if (tokenizer)
      detail += fmt::format("sample chat is {} tokens: ", tokenizer->encode(rendered, false).size());
    checks.push_back({"chat template", CheckStatus::ok, detail + "\"" + preview(rendered) + "\""});
  } catch (const InputError& e) {
    checks.push_back({"chat template", CheckStatus::warn, e.what()});
  }
  return checks;
}

} // namespace optkit::doctor
