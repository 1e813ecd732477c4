// What prefix caching (serve-deltas --enable-prefix-caching) saves when requests share a system
// prompt, side by side in one run on a random-weight model of Llama-3.2-1B's shape (the model
// perf_engine writes): `requests` requests, each the shared prompt plus 16 tokens of its own,
// arrive together; each asks for 4 tokens. Three runs: without prefix caching; with it, the
// shared prompt sent once before to warm the cache; with it and a cold cache (the first request
// computes the shared blocks, the others wait for them). Reported per run: mean time to first
// token, the time until the last finishes, and the prompt tokens the engine computed.
// Usage: perf_prefix_cache [shared prompt tokens, default 256] [requests, default 4] [threads, default all]
#include "model/random_model.hpp"
#include "runtime/kv_cache.hpp"
#include "runtime/transformer.hpp"
#include "serve/engine.hpp"

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

struct Figures {
  double mean_ttft_s = 0, makespan_s = 0;
  std::int64_t computed_prompt_tokens = 0, cached_tokens = 0;
};

std::vector<runtime::TokenId>
tokens(std::size_t count, int seed) {
  std::vector<runtime::TokenId> ids(count);
  for (std::size_t i = 0; i < count; ++i)
    ids[i] = static_cast<runtime::TokenId>((seed * 7919 + static_cast<int>(i) * 104729) % 128000);
  return ids;
}

// Submits each prompt at once and waits for all; returns the mean TTFT and the makespan.
std::pair<double, double>
serve_together(serve::Engine& engine, const std::vector<std::vector<runtime::TokenId>>& prompts) {
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t finished = 0;
  double ttft_sum = 0;
  SteadyClock::time_point last;
  const auto start = SteadyClock::now();
  for (const auto& p : prompts) {
    serve::GenerationParams params;
    params.max_tokens = 4;
    params.ignore_eos = true;
    params.seeded = true;
    engine.submit(p, params, [&](const serve::StepOutput& out) {
      if (out.finish == serve::FinishReason::none)
        return;
      const std::lock_guard lock(mutex);
      ttft_sum += std::chrono::duration<double>(out.first_token - out.arrival).count();
      last = std::max(last, out.finished);
      ++finished;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return finished == prompts.size(); });
  while (engine.stats().running > 0) // the engine publishes its counters just after the sinks ran
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return {ttft_sum / static_cast<double>(prompts.size()), std::chrono::duration<double>(last - start).count()};
}

Figures
measure(const std::filesystem::path& dir, unsigned threads, bool prefix_caching, bool warm, std::size_t shared_tokens,
        int requests) {
  runtime::RuntimeOptions options;
  options.threads = threads;
  options.kv_cache.prefix_caching = prefix_caching;
  auto model = std::make_unique<runtime::CpuTransformer>(dir, options);
  const runtime::KvCache& kv = model->kv_cache();
  serve::Engine engine(std::move(model), kv, {});
  const auto shared = tokens(shared_tokens, 1);
  if (warm) // the server (and, with prefix caching, the cache)
    serve_together(engine, {shared});
  else // the server only: a prompt that shares no block with the others
    serve_together(engine, {tokens(shared_tokens, 2)});
  const auto before = engine.stats();
  std::vector<std::vector<runtime::TokenId>> prompts;
  for (int r = 0; r < requests; ++r) {
    auto p = shared;
    const auto own = tokens(16, 100 + r);
    p.insert(p.end(), own.begin(), own.end());
    prompts.push_back(std::move(p));
  }
  const auto [ttft, makespan] = serve_together(engine, prompts);
  const auto after = engine.stats();
  return {ttft, makespan, after.prompt_tokens - before.prompt_tokens,
          after.prefix_cache_hits - before.prefix_cache_hits};
}

} // namespace

int
main(int argc, char** argv) {
  const auto shared_tokens = static_cast<std::size_t>(argc > 1 ? std::max(16, std::atoi(argv[1])) : 256);
  const int requests = argc > 2 ? std::max(1, std::atoi(argv[2])) : 4;
  const unsigned threads =
      argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : std::max(1u, std::thread::hardware_concurrency());
  const auto dir = std::filesystem::temp_directory_path() / "optkit-perf-models" / "llama-3.2-1b-BF16";
  if (!std::filesystem::exists(dir / "config.json")) {
    fmt::print("writing random BF16 model to {} ...\n", dir.string());
    model::write_random_model(dir, model::preset_model_config("llama-3.2-1b"), model::DType::bf16, 1);
  }
  const Figures off = measure(dir, threads, false, true, shared_tokens, requests);
  const Figures warm = measure(dir, threads, true, true, shared_tokens, requests);
  const Figures cold = measure(dir, threads, true, false, shared_tokens, requests);
  fmt::print("llama-3.2-1b BF16 random weights, {} threads: {} requests at once, each a {}-token shared prompt + 16 "
             "of its own, 4 tokens out\n",
             threads, requests, shared_tokens);
  for (const auto& [name, f] : {std::pair{"without prefix caching     ", off},
                                {"with prefix caching, warm  ", warm},
                                {"with prefix caching, cold  ", cold}})
    fmt::print("{}  mean TTFT {:>7.3f} s  all done {:>7.3f} s  prompt tokens computed {:>5}  from the cache {:>5}\n",
               name, f.mean_ttft_s, f.makespan_s, f.computed_prompt_tokens, f.cached_tokens);
  fmt::print("with prefix caching, warm: mean TTFT {:.2f}x lower, all done {:.2f}x sooner\n",
             off.mean_ttft_s / warm.mean_ttft_s, off.makespan_s / warm.makespan_s);
  fmt::print("with prefix caching, cold: mean TTFT {:.2f}x lower, all done {:.2f}x sooner\n",
             off.mean_ttft_s / cold.mean_ttft_s, off.makespan_s / cold.makespan_s);
  return 0;
}
