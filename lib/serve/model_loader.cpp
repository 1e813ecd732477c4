#include "serve/model_loader.hpp"

#include "core/available_cpus.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "model/memory_needs.hpp"
#include "model/model_config.hpp"
#include "model/weight_store.hpp"
#include "runtime/kv_cache.hpp"
#include "runtime/lora_adapter.hpp"
#include "runtime/transformer.hpp"
#include "serve/mock_model.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <thread>

namespace optkit::serve {

namespace {

// The KV budget under --max-memory: `wanted` (--kv-cache-memory, or the default) when it fits
// beside the mapped weights, the deltas' budget, a step's activations and the process, else what
// is left (the default) or an InputError stating the needs (nothing left, or --kv-cache-memory
// too large).
std::uint64_t
kv_budget_within(const ServeOptions& options, const model::ModelConfig& config, std::uint64_t wanted) {
  const auto max = *options.max_memory;
  if ((!options.deltas.empty() || !options.loras.empty()) && options.delta_memory_bytes == 0)
    throw InputError("--max-memory with --delta or --lora needs --delta-memory (the resident deltas' share of it)");
  const std::uint64_t weights = options.mock ? 0 : model::WeightStore(options.base).file_bytes();
  auto needs = model::run_memory_needs(config, weights, options.engine.max_num_batched_tokens, 0);
  const auto fixed = needs.total() + options.delta_memory_bytes;
  const bool given = options.kv_cache_bytes > 0;
  if (fixed < max && (!given || fixed + wanted <= max))
    return std::min(wanted, max - fixed);
  needs.kv_cache = given ? wanted : 0;
  throw InputError(fmt::format(
      "--max-memory {}: serve-deltas needs {}{}{}; raise --max-memory{}", model::gigabytes(max), needs.describe(),
      options.delta_memory_bytes > 0
          ? fmt::format(" and {} of --delta-memory", model::gigabytes(options.delta_memory_bytes))
          : "",
      given ? "" : " before any KV cache", given ? " or lower --kv-cache-memory" : ""));
}

} // namespace

LoadedModel
load_served_model(const ServeOptions& options, const model::Tokenizer& tokenizer) {
  const auto config = model::load_model_config(options.base);
  // The KV budget by default: max_num_seqs full contexts, at most 4 GiB; within --max-memory.
  const auto kv_budget = [&](std::uint64_t bytes_per_token) {
    const auto wanted =
        options.kv_cache_bytes > 0
            ? options.kv_cache_bytes
            : std::min<std::uint64_t>(std::uint64_t{4} << 30,
                                      bytes_per_token * static_cast<std::uint64_t>(config.max_position_embeddings) *
                                          static_cast<std::uint64_t>(options.engine.max_num_seqs));
    return options.max_memory ? kv_budget_within(options, config, wanted) : wanted;
  };
  LoadedModel loaded;
  loaded.engine = options.engine;
  if (options.mock) {
    if (options.device >= 0)
      throw InputError("--device cannot be combined with --mock (the mock model computes nothing)");
    if (!options.deltas.empty() || !options.loras.empty())
      throw InputError(std::string(options.deltas.empty() ? "--lora" : "--delta") +
                       " cannot be combined with --mock (the mock model computes nothing to apply it to)");
    std::vector<runtime::TokenId> cycle;
    for (const auto t : tokenizer.encode(" The mock model answers at a fixed rate.", false))
      if (std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), t) == config.eos_token_ids.end())
        cycle.push_back(t);
    runtime::KvCacheOptions kv_options;
    kv_options.budget_bytes = kv_budget(2 * sizeof(float));
    kv_options.prefix_caching = options.prefix_caching;
    auto mock = std::make_unique<MockModel>(config, cycle, options.mock_step, kv_options);
    loaded.kv = &mock->kv_cache();
    loaded.model = std::move(mock);
    return loaded;
  }
  runtime::RuntimeOptions runtime_options;
  runtime_options.device = options.device;
  runtime_options.int8_delta_activations = options.int8_delta_activations;
  runtime_options.activations = options.activations;
  runtime_options.weight_loading = options.weights;
  runtime_options.threads = options.threads > 0 ? options.threads : available_cpus();
  loaded.threads = runtime_options.threads;
  runtime_options.kv_cache.prefix_caching = options.prefix_caching;
  const std::uint64_t element_bytes = options.device >= 0 ? 2 : sizeof(float); // a device keeps BF16 keys and values
  runtime_options.kv_cache.budget_bytes =
      kv_budget(static_cast<std::uint64_t>(config.num_layers * config.kv_dim() * 2) * element_bytes);
  if (options.delta_serving == DeltaServing::swap) {
    if (!options.loras.empty())
      throw InputError("--baseline swap serves each --delta as a whole model; --lora is served decoupled only");
    // One whole model at a time: the engine keeps every step to one variant (the base included).
    std::vector<std::filesystem::path> dirs;
    for (const auto& [name, dir] : options.deltas) {
      loaded.variants.push_back({name, dir.string(), static_cast<std::int32_t>(dirs.size())});
      dirs.push_back(dir);
    }
    auto swap = std::make_unique<SwapModel>(options.base, dirs, runtime_options);
    loaded.device_name = swap->device_name();
    loaded.kv = &swap->kv_cache();
    loaded.swap = swap.get();
    loaded.model = std::move(swap);
    loaded.engine.max_deltas = 1;
    loaded.engine.base_takes_slot = true;
    loaded.engine.preempt_skippers = false; // vLLM-SCB batches a model's requests; it computes nothing twice
    log::info("serve-deltas: --baseline swap: {} variants served as whole models, one loaded at a time", dirs.size());
    return loaded;
  }
  auto transformer = std::make_unique<runtime::CpuTransformer>(options.base, runtime_options);
  if (const auto* device = transformer->device()) {
    loaded.device_name = device->device_name();
    log::info("serve-deltas: the whole step on {} ({:.1f} GiB of BF16 weights, a KV cache of {} blocks)",
              loaded.device_name, static_cast<double>(device->weight_bytes()) / (1u << 30),
              transformer->kv_cache().capacity_blocks().value_or(0));
  }
  loaded.transformer = transformer.get();
  loaded.kv = &transformer->kv_cache();
  loaded.model = std::move(transformer);
  return loaded;
}

std::unique_ptr<DeltaStore>
serve_beside(const ServeOptions& options, const LoadedModel& loaded, Engine& engine, const std::string& base_name) {
  if (loaded.transformer == nullptr)
    return nullptr;
  auto store = std::make_unique<DeltaStore>(*loaded.transformer, engine, DeltaStoreOptions{options.delta_memory_bytes});
  const auto add = [&](const std::string& flag, const std::string& name, const std::filesystem::path& dir) {
    if (name == base_name)
      throw InputError(flag + " " + name + "=...: the name is the base model's; pick another");
    if (flag == "--delta" && !std::filesystem::exists(dir / "delta_config.json") &&
        std::filesystem::exists(dir / "config.json"))
      throw InputError(flag + " " + name + "=" + dir.string() + ": a checkpoint folder, not a delta artifact; make " +
                       "one with `optkit compress delta --base " + options.base.string() + " --finetuned " +
                       dir.string() + " -o DIR`, or serve whole checkpoints with --baseline swap");
    if (flag == "--lora" && !runtime::is_lora_adapter(dir))
      throw InputError(flag + " " + name + "=" + dir.string() + ": no adapter_config.json (a PEFT LoRA adapter " +
                       "folder is expected; deltas go to --delta)");
    try {
      store->add(name, dir);
    } catch (const InputError& e) {
      throw InputError(flag + " " + name + "=" + dir.string() + ": " + e.what());
    }
  };
  for (const auto& [name, dir] : options.deltas)
    add("--delta", name, dir);
  for (const auto& [name, dir] : options.loras)
    add("--lora", name, dir);
  return store;
}

} // namespace optkit::serve
