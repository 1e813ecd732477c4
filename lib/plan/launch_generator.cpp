#include "plan/launch_generator.hpp"

#include <fmt/format.h>

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
kv_dtype_flag(perf::Precision kv, perf::Engine engine) {
  if (kv == perf::Precision::fp8)
    return engine == perf::Engine::sglang ? "fp8_e4m3" : "fp8";
  if (kv == perf::Precision::int8)
    return "int8";
  return "auto";
}

std::string
quantization_note(const PlanRequest& request) {
  switch (request.precision.weights) {
  case perf::Precision::int8:
    return "# weights int8: serve a checkpoint compressed with `optkit compress --recipe int_w8a8`\n";
  case perf::Precision::int4:
    return "# weights int4: serve a checkpoint compressed with `optkit compress --recipe int_w4a16`\n";
  default:
    return "";
  }
}

std::string
vllm_command(const Worker& w, const LaunchContext& c, int port) {
  const PlanRequest& r = *c.request;
  const bool moe = r.model.is_moe();
  std::string cmd = fmt::format("vllm serve {} --port {}", c.model_reference, port);
  cmd += fmt::format(" \\\n    --tensor-parallel-size {} --pipeline-parallel-size {}", w.parallel.tp, w.parallel.pp);
  if (moe && w.parallel.dp > 1)
    cmd += fmt::format(" --data-parallel-size {}", w.parallel.dp);
  if (moe && w.parallel.ep > 1)
    cmd += " --enable-expert-parallel";
  cmd += fmt::format(" \\\n    --max-num-seqs {} --max-num-batched-tokens {} --max-model-len {}", w.batch, w.max_tokens,
                     int(r.workload.isl + r.workload.osl));
  cmd += fmt::format(" \\\n    --gpu-memory-utilization {:.2f} --kv-cache-dtype {}", r.memory_fraction,
                     kv_dtype_flag(r.precision.kv_cache, perf::Engine::vllm));
  if (r.precision.weights == perf::Precision::fp8)
    cmd += " --quantization fp8";
  if (r.speculation.enabled())
    cmd += fmt::format(" \\\n    --speculative-config '{{\"method\":\"eagle\",\"num_speculative_tokens\":{}}}'",
                       r.speculation.draft_tokens);
  if (!w.role.empty())
    cmd +=
        fmt::format(" \\\n    --kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}}'");
  return cmd;
}

std::string
sglang_command(const Worker& w, const LaunchContext& c, int port) {
  const PlanRequest& r = *c.request;
  const bool moe = r.model.is_moe();
  // SGLang's --tp-size counts every GPU of the worker; --dp-size splits attention among them.
  std::string cmd = fmt::format("python -m sglang.launch_server --model-path {} --port {}", c.model_reference, port);
  cmd += fmt::format(" \\\n    --tp-size {} --pp-size {}", w.parallel.tp * w.parallel.dp, w.parallel.pp);
  if (moe && w.parallel.dp > 1)
    cmd += fmt::format(" --dp-size {} --enable-dp-attention", w.parallel.dp);
  if (moe && w.parallel.ep > 1)
    cmd += fmt::format(" --ep-size {}", w.parallel.ep);
  cmd += fmt::format(" \\\n    --max-running-requests {} --chunked-prefill-size {} --context-length {}", w.batch,
                     w.max_tokens, int(r.workload.isl + r.workload.osl));
  cmd += fmt::format(" \\\n    --mem-fraction-static {:.2f} --kv-cache-dtype {}", r.memory_fraction,
                     kv_dtype_flag(r.precision.kv_cache, perf::Engine::sglang));
  if (r.precision.weights == perf::Precision::fp8)
    cmd += " --quantization fp8";
  if (r.speculation.enabled())
    cmd += fmt::format(" \\\n    --speculative-algorithm EAGLE --speculative-num-steps {} --speculative-eagle-topk 1 "
                       "--speculative-num-draft-tokens {}",
                       r.speculation.draft_tokens, r.speculation.draft_tokens + 1);
  if (!w.role.empty())
    cmd += fmt::format(" \\\n    --disaggregation-mode {} --disaggregation-transfer-backend nixl", w.role);
  return cmd;
}

std::string
trtllm_options_yaml(const Worker& w, const LaunchContext& c) {
  const PlanRequest& r = *c.request;
  std::string yaml;
  yaml += fmt::format("enable_attention_dp: {}\n", w.parallel.dp > 1 ? "true" : "false");
  yaml += fmt::format("enable_chunked_prefill: false\n");
  yaml += "kv_cache_config:\n";
  yaml += fmt::format("  dtype: {}\n", kv_dtype_flag(r.precision.kv_cache, perf::Engine::trtllm));
  yaml += fmt::format("  free_gpu_memory_fraction: {:.2f}\n", r.memory_fraction);
  yaml += fmt::format("cuda_graph_config:\n  max_batch_size: {}\n", w.batch);
  if (r.speculation.enabled())
    yaml += fmt::format("speculative_config:\n  decoding_type: {}\n  max_draft_len: {}\n",
                        r.model.is_mla() ? "MTP" : "Eagle", r.speculation.draft_tokens);
  if (!w.role.empty())
    yaml += "cache_transceiver_config:\n  backend: DEFAULT\n";
  return yaml;
}

std::string
trtllm_command(const Worker& w, const LaunchContext& c, int port, const std::string& options_file) {
  const PlanRequest& r = *c.request;
  std::string cmd = fmt::format("trtllm-serve {} --backend pytorch --port {}", c.model_reference, port);
  cmd += fmt::format(" \\\n    --tp_size {} --pp_size {}", w.parallel.tp * w.parallel.dp, w.parallel.pp);
  if (r.model.is_moe())
    cmd += fmt::format(" --ep_size {}", w.parallel.ep);
  cmd += fmt::format(" \\\n    --max_batch_size {} --max_num_tokens {} --max_seq_len {}", w.batch, w.max_tokens,
                     int(r.workload.isl + r.workload.osl));
  cmd += fmt::format(" \\\n    --kv_cache_free_gpu_memory_fraction {:.2f} --extra_llm_api_options {}",
                     r.memory_fraction, options_file);
  return cmd;
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
  script += quantization_note(r);
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
    if (c.engine == perf::Engine::vllm)
      script += env + vllm_command(w, c, port) + " &\n";
    else if (c.engine == perf::Engine::sglang)
      script += env + sglang_command(w, c, port) + " &\n";
    else {
      const std::string options = fmt::format("extra-llm-api-options-{}.yaml", i);
      script += fmt::format("cat > {} <<'YAML'\n{}YAML\n", options, trtllm_options_yaml(w, c));
      script += env + trtllm_command(w, c, port, options) + " &\n";
    }
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
  yaml += fmt::format("slo: [\"ttft:mean<={}ms\", \"tpot:mean<={}ms\"]\n", r.ttft_limit_ms, r.tpot_limit_ms);
  yaml +=
      fmt::format("load:\n  concurrency: {}\n  request_rate: {:.3f}\n", concurrency, row.requests_per_s * row.replicas);
  yaml += fmt::format("predicted:\n  configuration: \"{}\"\n  ttft_ms: {:.2f}\n  tpot_ms: {:.3f}\n"
                      "  tokens_per_s_per_user: {:.2f}\n  tokens_per_s_per_gpu: {:.2f}\n  sources: \"{}\"\n",
                      describe(row, r.model.is_moe()), row.ttft_ms, row.tpot_ms, row.tokens_per_s_per_user,
                      row.tokens_per_s_per_gpu, perf::source_names(row.sources));
  return yaml;
}

} // namespace optkit::plan
