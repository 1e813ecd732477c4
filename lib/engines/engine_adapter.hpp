// One adapter per serving engine, in one place: engine-neutral settings (what a planner or a
// tuner decides) → that engine's command line in its own flag names, with its validity rules
// checked before anything launches. `plan --emit` renders these command lines into launch
// scripts; `bench --engine` and `tune` start them. Engines: vLLM, SGLang, TensorRT-LLM's
// trtllm-serve, llama.cpp's llama-server (a GGUF file; slots, context, batch, threads, flash
// attention, KV cache type, n-gram speculation) and optkit serve-deltas.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace optkit::engines {

enum class EngineKind { vllm, sglang, trtllm, llamacpp, optkit };

// "vllm" | "sglang" | "trtllm" | "llamacpp" | "optkit"; InputError naming the value otherwise.
EngineKind parse_engine(const std::string& name);
std::string to_string(EngineKind kind);

struct EngineSettings {
  std::string model; // Hugging Face id or a folder
  std::string host;  // empty: the engine's default
  int port = 8000;
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int data_parallel = 1;   // attention data parallelism of a MoE model (1: none)
  int expert_parallel = 1; // 1: none
  std::optional<int> max_num_seqs;
  std::optional<std::int64_t> max_num_batched_tokens;
  std::optional<std::int64_t> max_model_len;
  std::optional<bool> prefix_caching;    // reuse of cached prompt KV blocks (none: the engine's default)
  std::optional<double> memory_fraction; // the engine's own meaning (vLLM total, SGLang static, TRT free)
  std::string kv_cache_dtype;            // "" (engine default), "auto", "fp8", "int8"; llama.cpp's own: "f16",
                                         // "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"
  std::string quantization;              // "" or "fp8"
  int speculative_tokens = 0;            // 0: no speculative decoding
  bool speculative_mtp = false;          // MTP heads (DeepSeek) rather than an EAGLE draft
  std::string disaggregation_role;       // "", "prefill", "decode"
  std::optional<int> threads;            // optkit serve-deltas, llama-server: CPU threads
  std::optional<bool> flash_attention;   // llama-server: -fa on/off (none: its auto)
  bool all_layers_on_gpus = false;       // llama-server: -ngl 999 (every layer offloaded to the GPUs)
  std::optional<int> max_active_deltas;  // optkit serve-deltas: distinct deltas in one step
  std::vector<std::string> extra_args;   // appended as given
};

// A command line in groups of related flags (plan prints one group per line).
struct CommandLine {
  std::vector<std::string> program; // the executable and its leading words ("vllm", "serve", MODEL)
  std::vector<std::vector<std::string>> groups;
  // For TensorRT-LLM: the extra LLM-API options YAML the command's --extra_llm_api_options names.
  std::string extra_options_yaml;

  std::vector<std::string> argv() const; // program then every group, flattened
  // Shell text, each group on its own continuation line; arguments quoted where the shell needs it.
  std::string render() const;
};

// The logical knobs a tuner's search space may name for this engine, as its adapter maps them:
// max_num_seqs, max_num_batched_tokens, enable_prefix_caching (0 or 1) and, for the GPU engines,
// tensor_parallel, memory_fraction (each engine's own meaning) and speculative_tokens; for optkit
// serve-deltas, threads and max_active_deltas; for llama-server, max_num_seqs (slots),
// max_num_batched_tokens (its batch), threads, flash_attention (0 or 1) and speculative_tokens.
const std::vector<std::string>& logical_knobs(EngineKind kind);
// Sets what knob `knob` names; InputError naming the knob and the engine's knobs when it has none.
void apply_knob(EngineKind kind, EngineSettings& settings, const std::string& knob, double value);

// Throws InputError naming the engine, the setting and the rule when the settings are not valid
// for it (e.g. vLLM's max_num_batched_tokens ≥ max_num_seqs; optkit serve-deltas has no tensor
// parallelism). `options_file` is where TensorRT-LLM's extra options YAML will be written.
CommandLine command_line(EngineKind kind, const EngineSettings& settings, const std::string& options_file = "");

} // namespace optkit::engines
