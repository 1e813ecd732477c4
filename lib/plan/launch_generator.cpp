#include "plan/launch_generator.hpp"

#include "engines/engine_adapter.hpp"

#include <fmt/format.h>

#include <filesystem>

#include <map>
#include <vector>

namespace optkit::plan {

namespace {

struct Worker {
  std::string role; // "" (aggregated), "prefill", "decode"
  perf::ParallelConfig parallel;
  int batch = 0;
  int max_tokens = 0;
};

std::string
gpu_list(int first, int count) {
  std::string text;
  for (int i = 0; i < count; ++i)
    text += (i ? "," : "") + std::to_string(first + i);
  return text;
}

std::string
kv_dtype_name(perf::Precision kv) {
  if (kv == perf::Precision::fp8)
    return "fp8";
  if (kv == perf::Precision::int8)
    return "int8";
  return "auto";
}

engines::EngineKind
engine_kind(perf::Engine engine) {
  switch (engine) {
  case perf::Engine::sglang:
    return engines::EngineKind::sglang;
  case perf::Engine::trtllm:
    return engines::EngineKind::trtllm;
  case perf::Engine::llamacpp:
    return engines::EngineKind::llamacpp;
  default:
    return engines::EngineKind::vllm;
  }
}

// The GGUF type llama-server's weights take for the plan's weight precision.
std::string
gguf_type(perf::Precision weights) {
  switch (weights) {
  case perf::Precision::int8:
    return "Q8_0";
  case perf::Precision::int4:
    return "Q4_K_M";
  case perf::Precision::fp16:
    return "F16";
  default:
    return "BF16";
  }
}

// The GGUF file llama-server is given: the model's name and its type ("Llama-3.1-8B-Instruct-Q4_K_M.gguf").
std::string
gguf_file(const LaunchContext& c) {
  const std::string name = std::filesystem::path(c.model_reference).filename().string();
  return fmt::format("{}-{}.gguf", name.empty() ? "model" : name, gguf_type(c.request->precision.weights));
}

// llama-server's spelling of the plan's KV precision: q8_0 is its 8-bit cache (no FP8 type).
std::string
llamacpp_kv_type(perf::Precision kv) {
  return kv == perf::Precision::fp8 || kv == perf::Precision::int8 ? "q8_0" : "";
}

// A llama-server worker: the GGUF file, every layer on the worker's GPUs, its slots and context;
// the rest as for the other engines.
engines::EngineSettings
llamacpp_worker_settings(engines::EngineSettings s, const LaunchContext& c) {
  s.model = gguf_file(c);
  s.all_layers_on_gpus = true;
  s.memory_fraction.reset(); // it sizes its KV cache by the context instead
  s.kv_cache_dtype = llamacpp_kv_type(c.request->precision.kv_cache);
  s.quantization.clear(); // the GGUF file's own type
  return s;
}

// One worker of the plan in engine-neutral settings; the engine's adapter spells them.
engines::EngineSettings
worker_settings(const Worker& w, const LaunchContext& c, int port) {
  const PlanRequest& r = *c.request;
  const bool moe = r.model.is_moe();
  engines::EngineSettings s;
  s.model = c.model_reference;
  s.port = port;
  s.tensor_parallel = w.parallel.tp;
  s.pipeline_parallel = w.parallel.pp;
  s.data_parallel = moe ? w.parallel.dp : 1;
  s.expert_parallel = moe ? w.parallel.ep : 1;
  s.max_num_seqs = w.batch;
  s.max_num_batched_tokens = w.max_tokens;
  s.max_model_len = static_cast<std::int64_t>(r.workload.isl + r.workload.osl);
  s.memory_fraction = r.memory_fraction;
  s.kv_cache_dtype = kv_dtype_name(r.precision.kv_cache);
  if (r.precision.weights == perf::Precision::fp8)
    s.quantization = "fp8";
  if (r.speculation.enabled()) {
    s.speculative_tokens = r.speculation.draft_tokens;
    s.speculative_mtp = r.model.is_mla();
  }
  s.disaggregation_role = w.role;
  return c.engine == perf::Engine::llamacpp ? llamacpp_worker_settings(std::move(s), c) : s;
}

std::string
quantization_note(const PlanRequest& request, const LaunchContext& c) {
  if (c.engine == perf::Engine::llamacpp)
    return fmt::format("# llama-server reads {}: convert the checkpoint with llama.cpp's convert_hf_to_gguf.py{}\n"
                       "# timings are predicted from the perf database's kernels, not llama.cpp's own: measure "
                       "them with `optkit bench --engine llamacpp`\n",
                       gguf_file(c),
                       request.precision.weights == perf::Precision::int8 ||
                               request.precision.weights == perf::Precision::int4
                           ? fmt::format(", then llama-quantize it to {}", gguf_type(request.precision.weights))
                           : std::string());
  switch (request.precision.weights) {
  case perf::Precision::int8:
    return "# weights int8: serve a checkpoint compressed with `optkit compress --recipe int_w8a8`\n";
  case perf::Precision::int4:
    return "# weights int4: serve a checkpoint compressed with `optkit compress --recipe int_w4a16`\n";
  default:
    return "";
  }
}

} // namespace

std::string
preset_repository(const std::string& preset) {
  static const std::map<std::string, std::string> repositories = {
      {"llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"},
      {"llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct"},
      {"llama-3.1-405b", "meta-llama/Llama-3.1-405B-Instruct"},
      {"qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct"},
      {"qwen3-32b", "Qwen/Qwen3-32B"},
      {"qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B"},
      {"mistral-small-24b", "mistralai/Mistral-Small-24B-Instruct-2501"},
      {"deepseek-v3", "deepseek-ai/DeepSeek-V3"},
  };
  const auto it = repositories.find(preset);
  return it == repositories.end() ? preset : it->second;
}

std::string
launch_script(const PlanRow& row, const LaunchContext& c) {
  const PlanRequest& r = *c.request;
  const int isl = int(r.workload.isl), osl = int(r.workload.osl);
  std::vector<Worker> workers;
  if (row.mode == ServingMode::disaggregated) {
    for (int unit = 0; unit < row.replicas; ++unit) {
      for (int i = 0; i < row.prefill_workers; ++i)
        workers.push_back({"prefill", row.prefill_parallel, row.prefill_batch, row.prefill_batch * isl});
      for (int i = 0; i < row.decode_workers; ++i)
        workers.push_back({"decode", row.parallel, row.batch, std::max(row.batch, 256)});
    }
  } else {
    const int max_tokens = row.mode == ServingMode::aggregated ? row.ctx_tokens + row.batch : row.batch * isl;
    for (int i = 0; i < row.replicas; ++i)
      workers.push_back({"", row.parallel, row.batch, max_tokens});
  }
  std::string script = "#!/usr/bin/env bash\n";
  script += fmt::format("# optkit plan: {} on {} x {}, ISL {} / OSL {}: {}\n", r.model.name, r.gpus, c.system_name, isl,
                        osl, describe(row, r.model.is_moe()));
  script += fmt::format("# predicted: TTFT {:.1f} ms, TPOT {:.2f} ms, {:.1f} tokens/s/user, {:.1f} tokens/s/GPU ({})\n",
                        row.ttft_ms, row.tpot_ms, row.tokens_per_s_per_user, row.tokens_per_s_per_gpu,
                        perf::source_names(row.sources));
  script += quantization_note(r, c);
  if (c.engine == perf::Engine::vllm && r.model.is_moe() && row.parallel.ep > 1 &&
      row.parallel.ep != row.parallel.tp * row.parallel.dp)
    script += "# note: vLLM's expert-parallel size is always tp x dp; this row's ep differs\n";
  script += "set -euo pipefail\n";
  int first_gpu = 0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const Worker& w = workers[i];
    const int port = 8000 + int(i);
    const std::string env = fmt::format("CUDA_VISIBLE_DEVICES={} ", gpu_list(first_gpu, w.parallel.gpus()));
    first_gpu += w.parallel.gpus();
    if (!w.role.empty())
      script += fmt::format("# {} worker\n", w.role);
    const std::string options = fmt::format("extra-llm-api-options-{}.yaml", i);
    const auto command = engines::command_line(engine_kind(c.engine), worker_settings(w, c, port), options);
    if (!command.extra_options_yaml.empty())
      script += fmt::format("cat > {} <<'YAML'\n{}YAML\n", options, command.extra_options_yaml);
    script += env + command.render() + " &\n";
  }
  if (row.mode == ServingMode::disaggregated)
    script +=
        "# put a prefill/decode-aware router in front (vLLM/SGLang router, Dynamo, or trtllm-serve disaggregated)\n";
  script += "wait\n";
  return script;
}

std::string
bench_profile_yaml(const PlanRow& row, const LaunchContext& c, std::int64_t run_id) {
  const PlanRequest& r = *c.request;
  const int concurrency =
      row.mode == ServingMode::disaggregated ? row.batch * row.decode_workers * row.replicas : row.batch * row.replicas;
  // optkit bench reads this file as a serving profile (`optkit bench --profile FILE`): the
  // workload as fixed lengths, the SLA as its default SLOs (means, as the planner predicts
  // them) and the predicted rate as the search's first rate.
  std::string yaml = fmt::format("# Serving profile for optkit bench, written by optkit plan (run {}).\n", run_id);
  yaml += fmt::format("name: plan-{}-{}\n", r.model.name, perf::engine_name(c.engine));
  yaml += fmt::format("description: \"{}\"\n", describe(row, r.model.is_moe()));
  yaml += fmt::format("model: {}\n", c.model_reference);
  yaml += fmt::format("input_tokens: {{distribution: fixed, mean: {}}}\noutput_tokens: {{distribution: fixed, mean: "
                      "{}}}\nshared_prefix_tokens: {}\nignore_eos: true\n",
                      int(r.workload.isl), int(r.workload.osl), int(r.workload.prefix));
  yaml += fmt::format("slo: [\"ttft:mean<={}ms\", \"tpot:mean<={}ms\"{}]\n", r.ttft_limit_ms, r.tpot_limit_ms,
                      r.request_latency_limit_ms ? fmt::format(", \"e2e:mean<={}ms\"", *r.request_latency_limit_ms)
                                                 : std::string());
  yaml +=
      fmt::format("load:\n  concurrency: {}\n  request_rate: {:.3f}\n", concurrency, row.requests_per_s * row.replicas);
  yaml += fmt::format("predicted:\n  configuration: \"{}\"\n  ttft_ms: {:.2f}\n  tpot_ms: {:.3f}\n"
                      "  tokens_per_s_per_user: {:.2f}\n  tokens_per_s_per_gpu: {:.2f}\n  sources: \"{}\"\n",
                      describe(row, r.model.is_moe()), row.ttft_ms, row.tpot_ms, row.tokens_per_s_per_user,
                      row.tokens_per_s_per_gpu, perf::source_names(row.sources));
  return yaml;
}

} // namespace optkit::plan
