#include "engines/engine_adapter.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace optkit::engines {

namespace {

using Group = std::vector<std::string>;

std::string
kv_dtype(const EngineSettings& s, EngineKind kind) {
  if (s.kv_cache_dtype == "fp8" && kind == EngineKind::sglang)
    return "fp8_e4m3";
  return s.kv_cache_dtype;
}

std::string
number(double value) {
  return fmt::format("{:.2f}", value);
}

void
reject(EngineKind kind, const std::string& why) {
  throw InputError(fmt::format("engine {}: {}", to_string(kind), why));
}

void
check_common(EngineKind kind, const EngineSettings& s) {
  if (s.model.empty())
    reject(kind, "no model given");
  if (s.port < 1 || s.port > 65535)
    reject(kind, fmt::format("port {} is not in 1-65535", s.port));
  if (s.tensor_parallel < 1 || s.pipeline_parallel < 1 || s.data_parallel < 1 || s.expert_parallel < 1)
    reject(kind, "parallel sizes must be at least 1");
  if (s.memory_fraction && !(*s.memory_fraction > 0 && *s.memory_fraction <= 1))
    reject(kind, fmt::format("memory fraction {} is not in (0, 1]", *s.memory_fraction));
  if (s.max_num_seqs && *s.max_num_seqs < 1)
    reject(kind, "max_num_seqs must be at least 1");
  if (s.flash_attention && kind != EngineKind::llamacpp)
    reject(kind, "flash_attention is llama-server's switch; this engine chooses its attention kernels itself");
  if (s.threads && kind != EngineKind::llamacpp && kind != EngineKind::optkit)
    reject(kind, "threads are set for CPU engines (llama-server, optkit serve-deltas) only");
}

CommandLine
vllm(const EngineSettings& s) {
  // vLLM refuses a token budget smaller than its sequence cap at start-up.
  if (s.max_num_seqs && s.max_num_batched_tokens && *s.max_num_batched_tokens < *s.max_num_seqs)
    reject(EngineKind::vllm, fmt::format("max_num_batched_tokens {} is below max_num_seqs {}",
                                         *s.max_num_batched_tokens, *s.max_num_seqs));
  CommandLine c;
  c.program = {"vllm", "serve", s.model, "--port", std::to_string(s.port)};
  if (!s.host.empty())
    c.program.insert(c.program.end(), {"--host", s.host});
  Group parallel = {"--tensor-parallel-size", std::to_string(s.tensor_parallel), "--pipeline-parallel-size",
                    std::to_string(s.pipeline_parallel)};
  if (s.data_parallel > 1)
    parallel.insert(parallel.end(), {"--data-parallel-size", std::to_string(s.data_parallel)});
  if (s.expert_parallel > 1)
    parallel.push_back("--enable-expert-parallel");
  c.groups.push_back(parallel);
  Group batching;
  if (s.max_num_seqs)
    batching.insert(batching.end(), {"--max-num-seqs", std::to_string(*s.max_num_seqs)});
  if (s.max_num_batched_tokens)
    batching.insert(batching.end(), {"--max-num-batched-tokens", std::to_string(*s.max_num_batched_tokens)});
  if (s.max_model_len)
    batching.insert(batching.end(), {"--max-model-len", std::to_string(*s.max_model_len)});
  if (s.prefix_caching)
    batching.push_back(*s.prefix_caching ? "--enable-prefix-caching" : "--no-enable-prefix-caching");
  c.groups.push_back(batching);
  Group memory;
  if (s.memory_fraction)
    memory.insert(memory.end(), {"--gpu-memory-utilization", number(*s.memory_fraction)});
  if (!s.kv_cache_dtype.empty())
    memory.insert(memory.end(), {"--kv-cache-dtype", kv_dtype(s, EngineKind::vllm)});
  if (!s.quantization.empty())
    memory.insert(memory.end(), {"--quantization", s.quantization});
  c.groups.push_back(memory);
  if (s.speculative_tokens > 0)
    c.groups.push_back({"--speculative-config",
                        fmt::format(R"({{"method":"eagle","num_speculative_tokens":{}}})", s.speculative_tokens)});
  if (!s.disaggregation_role.empty())
    c.groups.push_back({"--kv-transfer-config", R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})"});
  return c;
}

CommandLine
sglang(const EngineSettings& s) {
  CommandLine c;
  c.program = {"python", "-m", "sglang.launch_server", "--model-path", s.model, "--port", std::to_string(s.port)};
  if (!s.host.empty())
    c.program.insert(c.program.end(), {"--host", s.host});
  // SGLang's --tp-size counts every GPU of the worker; --dp-size splits attention among them.
  Group parallel = {"--tp-size", std::to_string(s.tensor_parallel * s.data_parallel), "--pp-size",
                    std::to_string(s.pipeline_parallel)};
  if (s.data_parallel > 1)
    parallel.insert(parallel.end(), {"--dp-size", std::to_string(s.data_parallel), "--enable-dp-attention"});
  if (s.expert_parallel > 1)
    parallel.insert(parallel.end(), {"--ep-size", std::to_string(s.expert_parallel)});
  c.groups.push_back(parallel);
  Group batching;
  if (s.max_num_seqs)
    batching.insert(batching.end(), {"--max-running-requests", std::to_string(*s.max_num_seqs)});
  if (s.max_num_batched_tokens)
    batching.insert(batching.end(), {"--chunked-prefill-size", std::to_string(*s.max_num_batched_tokens)});
  if (s.max_model_len)
    batching.insert(batching.end(), {"--context-length", std::to_string(*s.max_model_len)});
  if (s.prefix_caching && !*s.prefix_caching) // the radix cache is on by default
    batching.push_back("--disable-radix-cache");
  c.groups.push_back(batching);
  Group memory;
  if (s.memory_fraction)
    memory.insert(memory.end(), {"--mem-fraction-static", number(*s.memory_fraction)});
  if (!s.kv_cache_dtype.empty())
    memory.insert(memory.end(), {"--kv-cache-dtype", kv_dtype(s, EngineKind::sglang)});
  if (!s.quantization.empty())
    memory.insert(memory.end(), {"--quantization", s.quantization});
  c.groups.push_back(memory);
  if (s.speculative_tokens > 0)
    c.groups.push_back({"--speculative-algorithm", "EAGLE", "--speculative-num-steps",
                        std::to_string(s.speculative_tokens), "--speculative-eagle-topk", "1",
                        "--speculative-num-draft-tokens", std::to_string(s.speculative_tokens + 1)});
  if (!s.disaggregation_role.empty())
    c.groups.push_back({"--disaggregation-mode", s.disaggregation_role, "--disaggregation-transfer-backend", "nixl"});
  return c;
}

CommandLine
trtllm(const EngineSettings& s, const std::string& options_file) {
  CommandLine c;
  c.program = {"trtllm-serve", s.model, "--backend", "pytorch", "--port", std::to_string(s.port)};
  if (!s.host.empty())
    c.program.insert(c.program.end(), {"--host", s.host});
  Group parallel = {"--tp_size", std::to_string(s.tensor_parallel * s.data_parallel), "--pp_size",
                    std::to_string(s.pipeline_parallel)};
  if (s.expert_parallel > 1 || s.data_parallel > 1)
    parallel.insert(parallel.end(), {"--ep_size", std::to_string(s.expert_parallel)});
  c.groups.push_back(parallel);
  Group batching;
  if (s.max_num_seqs)
    batching.insert(batching.end(), {"--max_batch_size", std::to_string(*s.max_num_seqs)});
  if (s.max_num_batched_tokens)
    batching.insert(batching.end(), {"--max_num_tokens", std::to_string(*s.max_num_batched_tokens)});
  if (s.max_model_len)
    batching.insert(batching.end(), {"--max_seq_len", std::to_string(*s.max_model_len)});
  c.groups.push_back(batching);
  Group memory;
  if (s.memory_fraction)
    memory.insert(memory.end(), {"--kv_cache_free_gpu_memory_fraction", number(*s.memory_fraction)});
  if (!options_file.empty())
    memory.insert(memory.end(), {"--extra_llm_api_options", options_file});
  c.groups.push_back(memory);
  std::string& yaml = c.extra_options_yaml;
  yaml += fmt::format("enable_attention_dp: {}\n", s.data_parallel > 1 ? "true" : "false");
  yaml += "enable_chunked_prefill: false\n";
  yaml += "kv_cache_config:\n";
  yaml += fmt::format("  dtype: {}\n", s.kv_cache_dtype.empty() ? "auto" : kv_dtype(s, EngineKind::trtllm));
  if (s.memory_fraction)
    yaml += fmt::format("  free_gpu_memory_fraction: {}\n", number(*s.memory_fraction));
  if (s.prefix_caching)
    yaml += fmt::format("  enable_block_reuse: {}\n", *s.prefix_caching ? "true" : "false");
  if (s.max_num_seqs)
    yaml += fmt::format("cuda_graph_config:\n  max_batch_size: {}\n", *s.max_num_seqs);
  if (s.speculative_tokens > 0)
    yaml += fmt::format("speculative_config:\n  decoding_type: {}\n  max_draft_len: {}\n",
                        s.speculative_mtp ? "MTP" : "Eagle", s.speculative_tokens);
  if (!s.disaggregation_role.empty())
    yaml += "cache_transceiver_config:\n  backend: DEFAULT\n";
  return c;
}

// llama-server's KV cache types (-ctk/-ctv).
constexpr std::string_view kLlamaCacheTypes[] = {"f32",  "f16",    "bf16", "q8_0", "q4_0",
                                                 "q4_1", "iq4_nl", "q5_0", "q5_1"};

void
check_llamacpp(const EngineSettings& s) {
  const auto unsupported = [](const std::string& what) { reject(EngineKind::llamacpp, what); };
  if (s.data_parallel > 1 || s.expert_parallel > 1)
    unsupported("has no attention data parallelism or expert parallelism (its --split-mode splits layers or rows)");
  if (s.tensor_parallel > 1 && s.pipeline_parallel > 1)
    unsupported("splits a model over GPUs one way at a time (--split-mode row for tensor parallelism, layer for "
                "pipeline parallelism), not both");
  if (s.memory_fraction)
    unsupported("has no GPU memory fraction (its KV cache is sized by the context, -c)");
  if (!s.quantization.empty())
    unsupported("takes its weights' quantization from the GGUF file; quantize the file instead");
  if (!s.disaggregation_role.empty())
    unsupported("has no prefill/decode disaggregation");
  if (s.max_active_deltas)
    unsupported("serves no deltas");
  if (s.prefix_caching && !*s.prefix_caching)
    unsupported("reuses each slot's cached prompt per request (cache_prompt); it has no flag to turn that off");
  if (s.speculative_mtp)
    unsupported("MTP speculation is not set by optkit; pass --spec-type with --engine-arg");
  if (!s.kv_cache_dtype.empty() && s.kv_cache_dtype != "auto" &&
      std::find(std::begin(kLlamaCacheTypes), std::end(kLlamaCacheTypes), s.kv_cache_dtype) ==
          std::end(kLlamaCacheTypes))
    unsupported(fmt::format("KV cache type '{}' is not one of f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, "
                            "q5_1 (its 8-bit type is q8_0)",
                            s.kv_cache_dtype));
  if (s.threads && *s.threads < 1)
    unsupported("threads must be at least 1");
  if (s.max_num_batched_tokens && *s.max_num_batched_tokens < 1)
    unsupported("max_num_batched_tokens must be at least 1");
}

// llama-server: slots (-np), the whole context (-c: each slot's max_model_len times the slots,
// as llama-server divides it among them), the logical batch (-b, with the physical batch -ub no
// larger), threads for generation and batches, flash attention, the KV cache type for keys and
// values, n-gram speculation of up to speculative_tokens drafted tokens (no draft model needed),
// and always --metrics (bench reads its queue there). On GPUs: every layer offloaded (-ngl), and a
// model over several split evenly (-ts) by rows (tensor parallelism) or by layers (pipeline).

// llama-server's GPU flags: -ngl 999, and over several GPUs -sm row|layer with an even -ts.
Group
gpu_split(const EngineSettings& s) {
  Group group{"-ngl", "999"};
  const int gpus = std::max(s.tensor_parallel, s.pipeline_parallel);
  if (gpus > 1) {
    std::string shares;
    for (int g = 0; g < gpus; ++g)
      shares += g == 0 ? "1" : ",1";
    group.insert(group.end(), {"-sm", s.tensor_parallel > 1 ? "row" : "layer", "-ts", shares});
  }
  return group;
}

CommandLine
llamacpp(const EngineSettings& s) {
  check_llamacpp(s);
  CommandLine c;
  c.program = {"llama-server", "-m", s.model, "--port", std::to_string(s.port)};
  if (!s.host.empty())
    c.program.insert(c.program.end(), {"--host", s.host});
  Group slots;
  if (s.max_num_seqs)
    slots.insert(slots.end(), {"-np", std::to_string(*s.max_num_seqs)});
  if (s.max_model_len)
    slots.insert(slots.end(), {"-c", std::to_string(*s.max_model_len * s.max_num_seqs.value_or(1))});
  if (s.max_num_batched_tokens)
    slots.insert(slots.end(), {"-b", std::to_string(*s.max_num_batched_tokens), "-ub",
                               std::to_string(std::min<std::int64_t>(*s.max_num_batched_tokens, 512))});
  c.groups.push_back(slots);
  Group compute;
  if (s.threads)
    compute.insert(compute.end(), {"-t", std::to_string(*s.threads), "-tb", std::to_string(*s.threads)});
  if (s.flash_attention)
    compute.insert(compute.end(), {"-fa", *s.flash_attention ? "on" : "off"});
  if (!s.kv_cache_dtype.empty() && s.kv_cache_dtype != "auto")
    compute.insert(compute.end(), {"-ctk", s.kv_cache_dtype, "-ctv", s.kv_cache_dtype});
  c.groups.push_back(compute);
  if (s.speculative_tokens > 0)
    c.groups.push_back({"--spec-type", "ngram-simple", "--spec-draft-n-max", std::to_string(s.speculative_tokens)});
  if (s.all_layers_on_gpus || s.tensor_parallel > 1 || s.pipeline_parallel > 1)
    c.groups.push_back(gpu_split(s));
  c.groups.push_back({"--metrics"});
  return c;
}

CommandLine
optkit_serve(const EngineSettings& s) {
  const auto unsupported = [](const char* what) {
    reject(EngineKind::optkit, fmt::format("optkit serve-deltas has no {} (a CPU engine on one process)", what));
  };
  if (s.tensor_parallel > 1 || s.pipeline_parallel > 1 || s.data_parallel > 1 || s.expert_parallel > 1)
    unsupported("model parallelism");
  if (s.speculative_tokens > 0)
    unsupported("speculative decoding");
  if (!s.disaggregation_role.empty())
    unsupported("prefill/decode disaggregation");
  if (!s.quantization.empty() || !s.kv_cache_dtype.empty() || s.memory_fraction)
    unsupported("quantization, KV dtype or GPU memory settings (it serves the folder as compressed)");
  if (s.max_num_seqs && s.max_num_batched_tokens && *s.max_num_batched_tokens < *s.max_num_seqs)
    reject(EngineKind::optkit, fmt::format("max_num_batched_tokens {} is below max_num_seqs {} (a step decodes one "
                                           "token of every running sequence)",
                                           *s.max_num_batched_tokens, *s.max_num_seqs));
  if (s.threads && *s.threads < 1)
    reject(EngineKind::optkit, "threads must be at least 1");
  CommandLine c;
  c.program = {"optkit", "serve-deltas", "--base", s.model, "--port", std::to_string(s.port)};
  if (!s.host.empty())
    c.program.insert(c.program.end(), {"--host", s.host});
  Group batching;
  if (s.max_num_seqs)
    batching.insert(batching.end(), {"--max-num-seqs", std::to_string(*s.max_num_seqs)});
  if (s.max_num_batched_tokens)
    batching.insert(batching.end(), {"--max-num-batched-tokens", std::to_string(*s.max_num_batched_tokens)});
  if (s.max_active_deltas)
    batching.insert(batching.end(), {"--max-deltas", std::to_string(*s.max_active_deltas)});
  if (s.prefix_caching)
    batching.push_back(*s.prefix_caching ? "--enable-prefix-caching" : "--no-enable-prefix-caching");
  c.groups.push_back(batching);
  if (s.threads)
    c.groups.push_back({"--threads", std::to_string(*s.threads)});
  return c;
}

} // namespace

EngineKind
parse_engine(const std::string& name) {
  if (name == "vllm")
    return EngineKind::vllm;
  if (name == "sglang")
    return EngineKind::sglang;
  if (name == "trtllm")
    return EngineKind::trtllm;
  if (name == "llamacpp")
    return EngineKind::llamacpp;
  if (name == "optkit")
    return EngineKind::optkit;
  throw InputError("engine '" + name + "' is not vllm, sglang, trtllm, llamacpp or optkit");
}

std::string
to_string(EngineKind kind) {
  switch (kind) {
  case EngineKind::vllm:
    return "vllm";
  case EngineKind::sglang:
    return "sglang";
  case EngineKind::trtllm:
    return "trtllm";
  case EngineKind::llamacpp:
    return "llamacpp";
  case EngineKind::optkit:
    return "optkit";
  }
  return "?";
}

std::vector<std::string>
CommandLine::argv() const {
  std::vector<std::string> out = program;
  for (const auto& group : groups)
    out.insert(out.end(), group.begin(), group.end());
  return out;
}

std::string
CommandLine::render() const {
  std::string text;
  for (const auto& word : program)
    text += (text.empty() ? "" : " ") + shell_quote(word);
  for (const auto& group : groups) {
    if (group.empty())
      continue;
    text += " \\\n   ";
    for (const auto& word : group)
      text += " " + shell_quote(word);
  }
  return text;
}

CommandLine
command_line(EngineKind kind, const EngineSettings& settings, const std::string& options_file) {
  check_common(kind, settings);
  CommandLine c;
  switch (kind) {
  case EngineKind::vllm:
    c = vllm(settings);
    break;
  case EngineKind::sglang:
    c = sglang(settings);
    break;
  case EngineKind::trtllm:
    c = trtllm(settings, options_file);
    break;
  case EngineKind::llamacpp:
    c = llamacpp(settings);
    break;
  case EngineKind::optkit:
    c = optkit_serve(settings);
    break;
  }
  if (!settings.extra_args.empty())
    c.groups.push_back(settings.extra_args);
  return c;
}

const std::vector<std::string>&
logical_knobs(EngineKind kind) {
  static const std::vector<std::string> gpu{"max_num_seqs",    "max_num_batched_tokens", "enable_prefix_caching",
                                            "tensor_parallel", "memory_fraction",        "speculative_tokens"};
  static const std::vector<std::string> cpu{"max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching",
                                            "threads", "max_active_deltas"};
  static const std::vector<std::string> llama{"max_num_seqs", "max_num_batched_tokens", "threads", "flash_attention",
                                              "speculative_tokens"};
  return kind == EngineKind::optkit ? cpu : kind == EngineKind::llamacpp ? llama : gpu;
}

void
apply_knob(EngineKind kind, EngineSettings& s, const std::string& knob, double value) {
  const auto& known = logical_knobs(kind);
  if (std::find(known.begin(), known.end(), knob) == known.end()) {
    std::string list;
    for (const auto& k : known)
      list += (list.empty() ? "" : ", ") + k;
    reject(kind, fmt::format("has no knob '{}' (its knobs: {})", knob, list));
  }
  const auto integer = static_cast<std::int64_t>(std::llround(value));
  if (knob == "max_num_seqs")
    s.max_num_seqs = static_cast<int>(integer);
  else if (knob == "max_num_batched_tokens")
    s.max_num_batched_tokens = integer;
  else if (knob == "tensor_parallel")
    s.tensor_parallel = static_cast<int>(integer);
  else if (knob == "memory_fraction")
    s.memory_fraction = value;
  else if (knob == "speculative_tokens")
    s.speculative_tokens = static_cast<int>(integer);
  else if (knob == "threads")
    s.threads = static_cast<int>(integer);
  else if (knob == "max_active_deltas")
    s.max_active_deltas = static_cast<int>(integer);
  else if (knob == "flash_attention") {
    if (value != 0.0 && value != 1.0)
      reject(kind, fmt::format("flash_attention is 0 or 1, got {}", value));
    s.flash_attention = value == 1.0;
  } else if (knob == "enable_prefix_caching") {
    if (value != 0.0 && value != 1.0)
      reject(kind, fmt::format("enable_prefix_caching is 0 or 1, got {}", value));
    s.prefix_caching = value == 1.0;
  }
}

} // namespace optkit::engines
