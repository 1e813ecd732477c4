// What serve-deltas' engine adds on top of the runtime it drives, side by side in one run: batched
// decode tokens/s of 16 sequences on a random-weight model of Llama-3.2-1B's shape
//   runtime  CpuTransformer::forward over the 16 sequences, one token each per call (the ceiling)
//   engine   serve::Engine with 16 requests submitted at once (scheduling, KV block accounting,
//            sampling, per-token outputs to each request's sink) on the same runtime
// Decode is timed from the step after every request has its first token to the last finish, so
// both figures are decode alone. The model is written once under $TMPDIR/optkit-perf-models (the
// folder perf_runtime uses). Usage: perf_engine [decode tokens, default 16] [threads, default all]
//   [dtype BF16|F32, default BF16] [device cpu|cuda[:N], default cpu: where the step runs]
#include "model/random_model.hpp"
#include "runtime/kv_cache.hpp"
#include "runtime/transformer.hpp"
#include "serve/engine.hpp"
#include "serve/serve_run.hpp"
#include "support/perf_args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

using namespace optkit;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr int kBatch = 16;
constexpr std::size_t kPrompt = 32;

std::vector<runtime::TokenId>
prompt(int seed) {
  std::vector<runtime::TokenId> ids(kPrompt);
  for (std::size_t i = 0; i < kPrompt; ++i)
    ids[i] = static_cast<runtime::TokenId>((seed * 7919 + static_cast<int>(i) * 104729) % 128000);
  return ids;
}

double
runtime_decode_tps(const std::filesystem::path& dir, const runtime::RuntimeOptions& options, int steps) {
  runtime::CpuTransformer model(dir, options);
  std::vector<std::vector<runtime::TokenId>> prompts;
  std::vector<runtime::SequenceInput> inputs;
  for (int b = 0; b < kBatch; ++b)
    prompts.push_back(prompt(b));
  for (int b = 0; b < kBatch; ++b)
    inputs.push_back({model.add_sequence(), prompts[static_cast<std::size_t>(b)], false});
  model.forward(inputs);
  std::vector<runtime::TokenId> next(kBatch, 1);
  double seconds = 0;
  for (int step = 0; step <= steps; ++step) {
    std::vector<runtime::SequenceInput> batch;
    for (int b = 0; b < kBatch; ++b)
      batch.push_back(
          {inputs[static_cast<std::size_t>(b)].sequence, std::span(&next[static_cast<std::size_t>(b)], 1), false});
    const auto t0 = SteadyClock::now();
    model.forward(batch);
    if (step > 0) // the first step warms caches, as the engine's first decode step is not timed either
      seconds += std::chrono::duration<double>(SteadyClock::now() - t0).count();
  }
  return kBatch * steps / seconds;
}

double
engine_decode_tps(const std::filesystem::path& dir, const runtime::RuntimeOptions& options, int steps) {
  auto model = std::make_unique<runtime::CpuTransformer>(dir, options);
  const runtime::KvCache& kv = model->kv_cache();
  serve::Engine engine(std::move(model), kv, {});
  std::mutex mutex;
  std::condition_variable cv;
  int finished = 0;
  std::vector<int> generated(kBatch, 0);
  SteadyClock::time_point decode_start, last_finish;
  for (int b = 0; b < kBatch; ++b) {
    serve::GenerationParams params;
    params.max_tokens = steps + 2; // the first token ends prefill, the second's step warms up
    params.ignore_eos = true;
    params.seeded = true;
    engine.submit(prompt(b), params, [&, b](const serve::StepOutput& out) {
      const std::lock_guard lock(mutex);
      if (out.token && ++generated[static_cast<std::size_t>(b)] == 2)
        decode_start = std::max(decode_start, SteadyClock::now()); // every request past its warm-up step
      if (out.finish != serve::FinishReason::none) {
        last_finish = std::max(last_finish, out.finished);
        ++finished;
        cv.notify_all();
      }
    });
  }
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return finished == kBatch; });
  return kBatch * steps / std::chrono::duration<double>(last_finish - decode_start).count();
}

} // namespace

int
main(int argc, char** argv) {
  constexpr std::string_view kUsage = "perf_engine [decode tokens, default 16] [threads, default all] [dtype "
                                      "BF16|F32, default BF16] [device cpu|cuda[:N], default cpu]";
  const int steps = test::positional_number(argc, argv, 1, "decode tokens", 16, 2, kUsage);
  const unsigned threads =
      test::positional_number(argc, argv, 2, "threads", std::max(1u, std::thread::hardware_concurrency()), 1u, kUsage);
  const auto parsed = model::parse_dtype(argc > 3 ? argv[3] : "BF16");
  if (!parsed || (*parsed != model::DType::bf16 && *parsed != model::DType::f32)) {
    fmt::print(stderr, "perf_engine: dtype must be BF16 or F32\n");
    return 2;
  }
  const model::DType dtype = *parsed;
  runtime::RuntimeOptions options;
  options.threads = threads;
  options.device = serve::parse_device(argc > 4 ? argv[4] : "cpu", "device");
  const auto dir = std::filesystem::temp_directory_path() / "optkit-perf-models" /
                   fmt::format("llama-3.2-1b-{}", model::dtype_name(dtype));
  if (!std::filesystem::exists(dir / "config.json")) {
    fmt::print("writing random {} model to {} ...\n", model::dtype_name(dtype), dir.string());
    model::write_random_model(dir, model::preset_model_config("llama-3.2-1b"), dtype, 1);
  }
  // Alternated twice, best of each, so a noisy neighbour does not decide the ratio.
  double runtime_best = 0, engine_best = 0;
  for (int round = 0; round < 2; ++round) {
    runtime_best = std::max(runtime_best, runtime_decode_tps(dir, options, steps));
    engine_best = std::max(engine_best, engine_decode_tps(dir, options, steps));
  }
  fmt::print("llama-3.2-1b {} random weights, batch {}, {}-token prompts, {} decode steps, {} threads, the "
             "step on {}\n",
             model::dtype_name(dtype), kBatch, kPrompt, steps, threads,
             options.device < 0 ? std::string("the CPU") : fmt::format("CUDA device {}", options.device));
  fmt::print("runtime batched forward  {:>8.2f} tok/s\n", runtime_best);
  fmt::print("serve engine             {:>8.2f} tok/s\n", engine_best);
  fmt::print("runtime / engine: {:.2f}x (goal <= 1.5x)\n", runtime_best / engine_best);
  return 0;
}
