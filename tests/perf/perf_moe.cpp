// Mixture-of-experts decode on the CPU (issue 41's goals), side by side in one run:
//   1. batch-1 decode tokens/s of a random-weight Qwen3-30B-A3B-shaped checkpoint (BF16, its
//      first --layers layers: 128 experts, top-8 of width 768) against a dense Qwen3 twin with the
//      same active parameters (one SwiGLU of width 8 x 768 = 6144, the same attention and
//      vocabulary); goal: MoE >= 0.8x the dense model;
//   2. batch-16 decode: the experts' bytes streamed per step (each call of an expert reads its
//      three matrices once) against the bound of each selected expert read once per step, and
//      against what reading the experts token by token would stream.
// Prints figures; asserts nothing.
//   perf_moe [--layers 4] [--threads N] [--steps 16] [--runs 5] [--dir /tmp/optkit-perf-moe]
#include "model/random_model.hpp"
#include "runtime/transformer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace optkit;
using runtime::SequenceInput;
using runtime::TokenId;

namespace {

double
now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Options {
  std::int64_t layers = 4, steps = 16, runs = 5;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::filesystem::path dir = "/tmp/optkit-perf-moe";
};

Options
parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--layers")
      o.layers = std::stoll(value);
    else if (flag == "--threads")
      o.threads = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--steps")
      o.steps = std::stoll(value);
    else if (flag == "--runs")
      o.runs = std::stoll(value);
    else if (flag == "--dir")
      o.dir = value;
    else {
      fmt::print(stderr, "perf_moe: unknown flag {}\n", flag);
      std::exit(2);
    }
  }
  return o;
}

// The MoE checkpoint and its dense twin (same attention, vocabulary and active MLP parameters).
std::pair<std::filesystem::path, std::filesystem::path>
write_models(const Options& o) {
  auto moe = model::preset_model_config("qwen3-30b-a3b");
  moe["num_hidden_layers"] = o.layers;
  auto dense = moe;
  dense["architectures"] = {"Qwen3ForCausalLM"};
  dense["model_type"] = "qwen3";
  dense["intermediate_size"] =
      moe["moe_intermediate_size"].get<std::int64_t>() * moe["num_experts_per_tok"].get<std::int64_t>();
  for (const char* key : {"moe_intermediate_size", "num_experts", "num_experts_per_tok", "norm_topk_prob",
                          "decoder_sparse_step", "mlp_only_layers"})
    dense.erase(key);
  const auto moe_dir = o.dir / fmt::format("qwen3-30b-a3b-{}l", o.layers);
  const auto dense_dir = o.dir / fmt::format("dense-twin-{}l", o.layers);
  for (const auto& [dir, config] : {std::pair{moe_dir, moe}, std::pair{dense_dir, dense}})
    if (!std::filesystem::exists(dir / "config.json")) {
      fmt::print("writing {} ...\n", dir.string());
      model::write_random_model(dir, config, model::DType::bf16, 11);
    }
  return {moe_dir, dense_dir};
}

// Median seconds per decode step of `batch` sequences, after a 32-token prefill each.
double
decode_step_seconds(runtime::CpuTransformer& model, std::int64_t batch, const Options& o) {
  std::vector<double> steps;
  for (std::int64_t run = 0; run < o.runs; ++run) {
    std::vector<runtime::SequenceId> seqs;
    for (std::int64_t b = 0; b < batch; ++b) {
      seqs.push_back(model.add_sequence());
      std::vector<TokenId> prompt(32);
      for (std::size_t t = 0; t < prompt.size(); ++t)
        prompt[t] = static_cast<TokenId>((b * 7919 + static_cast<std::int64_t>(t) * 104729 + run) % 150000);
      const SequenceInput in{seqs.back(), prompt, false};
      model.forward({&in, 1});
    }
    for (std::int64_t s = 0; s < o.steps; ++s) {
      std::vector<TokenId> tokens(static_cast<std::size_t>(batch));
      std::vector<SequenceInput> step;
      for (std::int64_t b = 0; b < batch; ++b) {
        tokens[static_cast<std::size_t>(b)] = static_cast<TokenId>((s * 31 + b * 977 + run) % 150000);
        step.push_back(
            {seqs[static_cast<std::size_t>(b)], std::span(tokens).subspan(static_cast<std::size_t>(b), 1), false});
      }
      const double t0 = now();
      model.forward(step);
      steps.push_back(now() - t0);
    }
    for (const auto seq : seqs)
      model.remove_sequence(seq);
  }
  std::nth_element(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2), steps.end());
  return steps[steps.size() / 2];
}

} // namespace

int
main(int argc, char** argv) {
  const auto o = parse(argc, argv);
  const auto [moe_dir, dense_dir] = write_models(o);
  runtime::CpuTransformer moe(moe_dir, {.threads = o.threads});
  runtime::CpuTransformer dense(dense_dir, {.threads = o.threads});
  const auto& c = moe.config();
  fmt::print("Qwen3-30B-A3B shape, {} of its 48 layers, BF16 mapped, {} threads; dense twin: SwiGLU of {}\n", o.layers,
             o.threads, dense.config().intermediate_size);

  // A 512-token prefill first touches every page of both models (every expert is chosen by some
  // token), so that the timed steps do not pay the mapping's first-touch faults.
  for (auto* model : {&moe, &dense}) {
    std::vector<TokenId> warm(512);
    for (std::size_t t = 0; t < warm.size(); ++t)
      warm[t] = static_cast<TokenId>((t * 7919) % 150000);
    const auto seq = model->add_sequence();
    const SequenceInput in{seq, warm, false};
    model->forward({&in, 1});
    model->remove_sequence(seq);
  }

  // 1. Batch-1 decode, the two models alternating runs so that the machine's noise hits both.
  std::vector<double> moe_steps, dense_steps;
  for (std::int64_t r = 0; r < 3; ++r) {
    moe_steps.push_back(decode_step_seconds(moe, 1, o));
    dense_steps.push_back(decode_step_seconds(dense, 1, o));
  }
  std::sort(moe_steps.begin(), moe_steps.end());
  std::sort(dense_steps.begin(), dense_steps.end());
  const double moe_tps = 1 / moe_steps[1], dense_tps = 1 / dense_steps[1];
  fmt::print("batch-1 decode: MoE {:.2f} tokens/s, dense twin {:.2f} tokens/s, MoE / dense {:.2f} (goal >= 0.8)\n",
             moe_tps, dense_tps, moe_tps / dense_tps);

  // 2. Batch-16 decode: per step, the experts' calls (each reads the expert's three matrices once)
  // against the distinct experts the step's 16 tokens chose (the bound) and the token-expert pairs
  // (reading the experts token by token).
  const std::uint64_t expert_bytes = 3ull * static_cast<std::uint64_t>(c.hidden_size * c.expert_intermediate_size) * 2;
  std::vector<runtime::SequenceId> seqs;
  std::vector<TokenId> prompt(32, 1000);
  for (int b = 0; b < 16; ++b) {
    seqs.push_back(moe.add_sequence());
    prompt[0] = static_cast<TokenId>(b * 1111);
    const SequenceInput in{seqs.back(), prompt, false};
    moe.forward({&in, 1});
  }
  std::int64_t calls = 0, distinct = 0, pairs = 0;
  for (std::int64_t s = 0; s < o.steps; ++s) {
    const auto before = moe.expert_counts();
    std::vector<TokenId> tokens(16);
    std::vector<SequenceInput> step;
    for (std::size_t b = 0; b < 16; ++b) {
      tokens[b] = static_cast<TokenId>((s * 31 + static_cast<std::int64_t>(b) * 977) % 150000);
      step.push_back({seqs[b], std::span(tokens).subspan(b, 1), false});
    }
    moe.forward(step);
    const auto& after = moe.expert_counts();
    for (std::size_t i = 0; i < after.calls.size(); ++i) {
      calls += after.calls[i] - before.calls[i];
      distinct += after.rows[i] > before.rows[i] ? 1 : 0;
      pairs += after.rows[i] - before.rows[i];
    }
  }
  const auto per_step = [&](std::int64_t n) {
    return static_cast<double>(n) * static_cast<double>(expert_bytes) / static_cast<double>(o.steps) / 1e6;
  };
  fmt::print("batch-16 decode, {} steps: experts streamed {:.0f} MB per step ({:.1f} experts per layer); bound "
             "(each selected expert once) {:.0f} MB; token by token {:.0f} MB; streamed / bound {:.2f}\n",
             o.steps, per_step(calls), static_cast<double>(calls) / static_cast<double>(o.steps * c.num_layers),
             per_step(distinct), per_step(pairs), static_cast<double>(calls) / static_cast<double>(distinct));
  return 0;
}
