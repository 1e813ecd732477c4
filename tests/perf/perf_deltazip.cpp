// DeltaZip's claim on the CPU, side by side in one run: serving the four tiny fine-tunes as deltas
// of tiny-base plus the base itself under a Zipf-1.5 popularity trace with Poisson arrivals,
// decoupled (serve-deltas' default: one shared base, each Δ kept compressed, every variant in the
// same batch) against the swap-full-model baseline (--baseline swap: merged variants loaded on
// demand, one at a time, as vLLM-SCB serves them in the seed). Both run the same trace through the
// same engine code that `optkit serve-deltas` runs (serve::load_served_model), directly rather
// than over HTTP, so the figures are the engine's and the model's, not the loopback's.
//   throughput = generated tokens / (last finish − first arrival); TTFT = first token − arrival.
// The deltas are made once with the real `optkit compress delta` (delta_2of4_int4) into
// $TMPDIR/perf_deltazip. Usage: perf_deltazip [requests, default 200] [rate req/s, default 20]
//   [threads, default all] [seed, default 1] [device cpu|cuda[:N], default cpu: where the step
//   runs, for both ways of serving] [traces, default 1: seeds seed, seed+1, …, each run all
//   three ways, then the ratios over all of them: total tokens over total makespan]
#include "model/tokenizer.hpp"
#include "runtime/kv_cache.hpp"
#include "serve/engine.hpp"
#include "serve/model_loader.hpp"
#include "serve/serve_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

using namespace optkit;
using SteadyClock = std::chrono::steady_clock;

namespace {

const std::filesystem::path kSource = OPTKIT_SOURCE_DIR;
const char* const kFineTunes[] = {"code", "glosses", "licenses", "quotes"};

std::filesystem::path
make_delta(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "perf_deltazip" / name;
  if (std::filesystem::exists(dir / "delta_config.json"))
    return dir;
  const auto models = kSource / "testdata" / "models";
  const std::string corpus = name == "code" ? "code" : name == "licenses" ? "licenses" : "english";
  const std::string command =
      fmt::format("OPTKIT_ARCHIVE='{}' '{}' -q compress delta --base '{}' --finetuned '{}' --recipe delta_2of4_int4 "
                  "--calib '{}' --samples 16 --seq-len 64 -o '{}' > /dev/null",
                  (dir.parent_path() / "archive.db").string(), OPTKIT_PERF_BINARY, (models / "tiny-base").string(),
                  (models / ("tiny-" + name)).string(),
                  (kSource / "testdata" / "corpora" / (corpus + ".calib.txt")).string(), dir.string());
  std::filesystem::create_directories(dir.parent_path());
  if (std::system(command.c_str()) != 0) {
    fmt::print(stderr, "perf_deltazip: `{}` failed\n", command);
    std::exit(1);
  }
  return dir;
}

struct TraceRequest {
  double arrival_s;
  std::int32_t model; // -1 the base, 0..3 the fine-tunes
  std::vector<runtime::TokenId> prompt;
};

// Poisson arrivals at `rate`; the model by Zipf(1.5) popularity over the five (rank 1 the most
// popular; ranks shuffled by the seed); prompts of 16–64 tokens cut from the held-out corpus.
std::vector<TraceRequest>
make_trace(int count, double rate, std::uint32_t seed, const model::Tokenizer& tokenizer) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights;
  for (int rank = 1; rank <= 5; ++rank)
    weights.push_back(std::pow(rank, -1.5));
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  std::vector<std::int32_t> by_rank = {-1, 0, 1, 2, 3};
  std::shuffle(by_rank.begin(), by_rank.end(), rng);
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<int> length(16, 64);
  const auto text = [] {
    std::ifstream in(kSource / "testdata" / "corpora" / "english.heldout.txt");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const auto tokens = tokenizer.encode(text, false);
  std::uniform_int_distribution<std::size_t> start(0, tokens.size() - 65);
  std::vector<TraceRequest> trace;
  double t = 0;
  for (int i = 0; i < count; ++i) {
    t += gap(rng);
    const auto at = start(rng);
    trace.push_back({t, by_rank[static_cast<std::size_t>(pick(rng))],
                     std::vector<runtime::TokenId>(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                                                   tokens.begin() + static_cast<std::ptrdiff_t>(at) + length(rng))});
  }
  return trace;
}

struct Result {
  double throughput = 0, mean_ttft = 0, p90_ttft = 0, makespan = 0;
  std::int64_t tokens = 0, failed = 0;
  std::int64_t swaps = 0, steps = 0, preemptions = 0;
  double swap_seconds = 0;
};

Result
replay(const serve::ServeOptions& options, const model::Tokenizer& tokenizer, const std::vector<TraceRequest>& trace,
       int output_tokens) {
  serve::LoadedModel loaded = serve::load_served_model(options, tokenizer);
  const runtime::KvCache& kv = *loaded.kv;
  const serve::SwapModel* swap = loaded.swap;
  serve::Engine engine(std::move(loaded.model), kv, loaded.engine);
  const auto deltas = serve::serve_beside(options, loaded, engine, "tiny-base"); // ids 0..3, as the trace names them
  std::mutex mutex;
  std::condition_variable done_cv;
  std::vector<double> ttft(trace.size(), -1);
  std::int64_t finished = 0, tokens = 0, failed = 0;
  SteadyClock::time_point last_finish;
  const auto start = SteadyClock::now();
  for (std::size_t i = 0; i < trace.size(); ++i) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(trace[i].arrival_s)));
    serve::GenerationParams params;
    params.max_tokens = output_tokens;
    params.ignore_eos = true;
    params.seeded = true;
    params.variant = trace[i].model;
    engine.submit(trace[i].prompt, params, [&, i](const serve::StepOutput& out) {
      if (out.finish == serve::FinishReason::none)
        return;
      const std::lock_guard lock(mutex);
      if (out.finish == serve::FinishReason::length) {
        ttft[i] = std::chrono::duration<double>(out.first_token - out.arrival).count();
        tokens += out.generated_tokens;
      } else {
        if (failed++ == 0)
          fmt::print(stderr, "perf_deltazip: a request failed: {}\n", out.error);
      }
      last_finish = std::max(last_finish, out.finished);
      ++finished;
      done_cv.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  done_cv.wait(lock, [&] { return finished == static_cast<std::int64_t>(trace.size()); });
  lock.unlock();
  engine.stop();
  Result r;
  r.steps = engine.stats().steps;
  r.preemptions = engine.stats().preemptions;
  if (swap) {
    r.swaps = swap->swaps();
    r.swap_seconds = swap->swap_seconds();
  }
  r.tokens = tokens;
  r.failed = failed;
  r.makespan = std::chrono::duration<double>(last_finish - start).count() - trace.front().arrival_s;
  r.throughput = static_cast<double>(tokens) / r.makespan;
  std::vector<double> t;
  for (const double v : ttft)
    if (v >= 0)
      t.push_back(v);
  std::sort(t.begin(), t.end());
  for (const double v : t)
    r.mean_ttft += v / static_cast<double>(t.size());
  r.p90_ttft = t.empty() ? 0 : t[static_cast<std::size_t>(0.9 * static_cast<double>(t.size() - 1))];
  return r;
}

} // namespace

int
main(int argc, char** argv) {
  const int requests = argc > 1 ? std::atoi(argv[1]) : 200;
  const double rate = argc > 2 ? std::atof(argv[2]) : 20.0;
  const unsigned threads = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 0;
  const auto first_seed = static_cast<std::uint32_t>(argc > 4 ? std::atoi(argv[4]) : 1);
  const int traces = argc > 6 ? std::max(1, std::atoi(argv[6])) : 1;
  const int output_tokens = 32;

  serve::ServeOptions options;
  options.base = kSource / "testdata" / "models" / "tiny-base";
  for (const char* name : kFineTunes)
    options.deltas.emplace_back(name, make_delta(name));
  options.threads = threads;
  options.device = serve::parse_device(argc > 5 ? argv[5] : "cpu", "device");
  options.engine.max_num_seqs = 64;
  const auto tokenizer = model::Tokenizer::load_folder(options.base);
  if (options.device >= 0)
    fmt::print("the step on CUDA device {}\n", options.device);
  const auto row = [](const char* name, const Result& r) {
    fmt::print("{:<28} {:>8.1f} tok/s  mean TTFT {:>7.1f} ms  p90 TTFT {:>7.1f} ms  makespan {:>5.2f} s  {} steps  "
               "{} swaps ({:.2f} s)  {} preempted  failed {}\n",
               name, r.throughput, r.mean_ttft * 1e3, r.p90_ttft * 1e3, r.makespan, r.steps, r.swaps, r.swap_seconds,
               r.preemptions, r.failed);
  };
  // Over all traces: tokens over summed makespans, and the mean of the traces' mean TTFTs (each
  // trace has the same number of requests).
  double tokens[2] = {0, 0}, makespan[2] = {0, 0}, ttft[2] = {0, 0};
  double lowest_ratio = INFINITY, highest_ratio = 0;
  std::int64_t failed = 0;
  for (int t = 0; t < traces; ++t) {
    const auto seed = first_seed + static_cast<std::uint32_t>(t);
    const auto trace = make_trace(requests, rate, seed, tokenizer);
    std::array<int, 5> per_model{};
    for (const auto& r : trace)
      ++per_model[static_cast<std::size_t>(r.model + 1)];
    fmt::print("trace (seed {}): {} requests, Poisson {:.1f} req/s over {:.1f} s, Zipf-1.5 over base + 4 deltas "
               "(requests: base {}, code {}, glosses {}, licenses {}, quotes {}), {} output tokens each\n",
               seed, requests, rate, trace.back().arrival_s, per_model[0], per_model[1], per_model[2], per_model[3],
               per_model[4], output_tokens);
    options.delta_serving = serve::DeltaServing::decoupled;
    const Result decoupled = replay(options, tokenizer, trace, output_tokens);
    options.delta_serving = serve::DeltaServing::swap;
    const Result swap = replay(options, tokenizer, trace, output_tokens);
    // For reference: the same trace with every request sent to the base (what serving deltas costs).
    auto base_only_trace = trace;
    for (auto& r : base_only_trace)
      r.model = -1;
    options.delta_serving = serve::DeltaServing::decoupled;
    const Result base_only = replay(options, tokenizer, base_only_trace, output_tokens);
    row("decoupled (serve-deltas)", decoupled);
    row("swap full models (baseline)", swap);
    row("(every request on the base)", base_only);
    const double ratio = decoupled.throughput / swap.throughput;
    fmt::print("decoupled / swap: throughput {:.2f}x (goal >= 2x), mean TTFT {:.2f}x (goal <= 0.5x)\n", ratio,
               decoupled.mean_ttft / swap.mean_ttft);
    lowest_ratio = std::min(lowest_ratio, ratio);
    highest_ratio = std::max(highest_ratio, ratio);
    for (int i = 0; i < 2; ++i) {
      const Result& r = i == 0 ? decoupled : swap;
      tokens[i] += static_cast<double>(r.tokens);
      makespan[i] += r.makespan;
      ttft[i] += r.mean_ttft / traces;
    }
    failed += decoupled.failed + swap.failed;
  }
  if (traces > 1) {
    fmt::print("over {} traces (seeds {}..{}): decoupled / swap throughput {:.2f}x (per trace {:.2f}x to {:.2f}x), "
               "mean TTFT {:.2f}x\n",
               traces, first_seed, first_seed + static_cast<std::uint32_t>(traces - 1),
               (tokens[0] / makespan[0]) / (tokens[1] / makespan[1]), lowest_ratio, highest_ratio, ttft[0] / ttft[1]);
  }
  return failed == 0 ? 0 : 1;
}
