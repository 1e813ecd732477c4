// DeltaZip's claim on the CPU, side by side in one run: serving fine-tunes as deltas of one base
// under Poisson arrivals with a popularity over the variants, decoupled (serve-deltas' default: one
// shared base, each Δ kept compressed, every variant in the same batch) against the swap-full-model
// baseline (--baseline swap: whole models loaded on demand, one at a time, as vLLM-SCB serves them
// in DeltaZip's paper). Both run the same trace through the same engine code that `optkit serve-deltas`
// runs (serve::load_served_model), directly rather than over HTTP, so the figures are the engine's
// and the model's, not the loopback's.
//   throughput = generated tokens / (last finish − first arrival); TTFT = first token − arrival.
// Two shapes:
//   --shape tiny (default): the four tiny fine-tunes as deltas of tiny-base, requests for the base
//     too, 32 output tokens; the swap baseline merges each Δ into the base when it loads it.
//   --shape llama-3.2-1b (or another preset of model/random_model.hpp): a random BF16 base of that
//     shape and --variants fine-tunes of it (base + low rank + noise, model::write_random_finetune),
//     each compressed with `optkit compress delta` (delta_2of4_int4), 64 output tokens; the swap
//     baseline loads each fine-tune's BF16 checkpoint from disk (mapped), as DeltaZip's baseline
//     loads its models from storage. Written once under $TMPDIR/perf_deltazip/SHAPE (about
//     (variants + 1) x the checkpoint's size on disk).
// Usage: perf_deltazip [--shape tiny|PRESET] [--variants N, default 16] [--distinct N: fine-tunes
//   written and compressed, the other variants copies of them on disk, default all] [--requests N, default 200
//   tiny, 48 real] [--rates R,R,... req/s] [--popularity zipf-1.5,uniform] [--output-tokens N]
//   [--max-deltas N: decoupled serving's cap on variants per step, default 0: none]
//   [--threads N, default all] [--seed N, default 1] [--traces N, default 1: seeds seed, seed+1, ...]
//   [--device cpu|cuda[:N]: where the step runs, for both ways of serving] [--prepare: write the
//   models and stop]
// Prints, per popularity and rate, both ways of serving and their ratios, then the goals' figures
// (goals_summary).
#include "model/random_model.hpp"
#include "model/tokenizer.hpp"
#include "runtime/kv_cache.hpp"
#include "serve/engine.hpp"
#include "serve/model_loader.hpp"
#include "serve/serve_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace optkit;
using SteadyClock = std::chrono::steady_clock;

namespace {

const std::filesystem::path kSource = OPTKIT_SOURCE_DIR;
const std::filesystem::path kWork = std::filesystem::temp_directory_path() / "perf_deltazip";

struct Flags {
  std::string shape = "tiny";
  int variants = 16;
  int distinct = 0; // 0: every variant its own fine-tune
  int requests = 0; // 0: the shape's default
  std::vector<double> rates;
  std::vector<std::string> popularities = {"zipf-1.5", "uniform"};
  int output_tokens = 0; // 0: the shape's default
  int max_deltas = 0;    // decoupled serving's --max-deltas (0: no cap, serve-deltas' default)
  unsigned threads = 0;
  std::uint32_t seed = 1;
  int traces = 1;
  std::string device = "cpu";
  bool prepare_only = false;
};

std::vector<double>
parse_rates(const std::string& text) {
  std::vector<double> rates;
  for (std::size_t at = 0; at < text.size();) {
    const auto comma = std::min(text.find(',', at), text.size());
    rates.push_back(std::stod(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return rates;
}

std::vector<std::string>
parse_list(const std::string& text) {
  std::vector<std::string> items;
  for (std::size_t at = 0; at < text.size();) {
    const auto comma = std::min(text.find(',', at), text.size());
    items.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

Flags
parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--prepare") {
      f.prepare_only = true;
      continue;
    }
    if (i + 1 >= argc) {
      fmt::print(stderr, "perf_deltazip: {} needs a value (see the usage at the top of perf_deltazip.cpp)\n", flag);
      std::exit(2);
    }
    const std::string value = argv[++i];
    if (flag == "--shape")
      f.shape = value;
    else if (flag == "--variants")
      f.variants = std::max(1, std::stoi(value));
    else if (flag == "--distinct")
      f.distinct = std::max(1, std::stoi(value));
    else if (flag == "--requests")
      f.requests = std::max(1, std::stoi(value));
    else if (flag == "--rates")
      f.rates = parse_rates(value);
    else if (flag == "--popularity")
      f.popularities = parse_list(value);
    else if (flag == "--output-tokens")
      f.output_tokens = std::max(1, std::stoi(value));
    else if (flag == "--max-deltas")
      f.max_deltas = std::max(0, std::stoi(value));
    else if (flag == "--threads")
      f.threads = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--seed")
      f.seed = static_cast<std::uint32_t>(std::stoul(value));
    else if (flag == "--traces")
      f.traces = std::max(1, std::stoi(value));
    else if (flag == "--device")
      f.device = value;
    else {
      fmt::print(stderr, "perf_deltazip: unknown flag {} (see the usage at the top of perf_deltazip.cpp)\n", flag);
      std::exit(2);
    }
  }
  for (const auto& p : f.popularities)
    if (p != "zipf-1.5" && p != "uniform") {
      fmt::print(stderr, "perf_deltazip: --popularity {}: zipf-1.5 or uniform\n", p);
      std::exit(2);
    }
  return f;
}

// What both ways of serving are given: the base, each variant as a delta (decoupled) and as a
// whole model (swap: the delta again, merged on load, or the fine-tuned checkpoint), and the
// models requests go to (-1: the base).
struct Served {
  std::filesystem::path base;
  std::vector<std::pair<std::string, std::filesystem::path>> deltas, whole_models;
  std::vector<std::int32_t> request_models;
  std::string description;
};

void
run_or_exit(const std::string& command) {
  if (std::system(command.c_str()) != 0) {
    fmt::print(stderr, "perf_deltazip: `{}` failed\n", command);
    std::exit(1);
  }
}

// `optkit compress delta` of `finetuned` against `base` into `out` (kept when already there).
void
compress_delta(const std::filesystem::path& base, const std::filesystem::path& finetuned, const std::string& corpus,
               const std::filesystem::path& out) {
  if (std::filesystem::exists(out / "delta_config.json"))
    return;
  std::filesystem::create_directories(out.parent_path());
  run_or_exit(fmt::format("OPTKIT_ARCHIVE='{}' '{}' -q compress delta --base '{}' --finetuned '{}' --recipe "
                          "delta_2of4_int4 --calib '{}' --samples 16 --seq-len 64 -o '{}' > /dev/null",
                          (out.parent_path() / "archive.db").string(), OPTKIT_PERF_BINARY, base.string(),
                          finetuned.string(), (kSource / "testdata" / "corpora" / (corpus + ".calib.txt")).string(),
                          out.string()));
}

Served
tiny_models() {
  Served s;
  const auto models = kSource / "testdata" / "models";
  s.base = models / "tiny-base";
  s.request_models = {-1};
  for (const std::string name : {"code", "glosses", "licenses", "quotes"}) {
    const auto dir = kWork / name;
    compress_delta(s.base, models / ("tiny-" + name),
                   name == "code"       ? "code"
                   : name == "licenses" ? "licenses"
                                        : "english",
                   dir);
    s.request_models.push_back(static_cast<std::int32_t>(s.deltas.size()));
    s.deltas.emplace_back(name, dir);
  }
  s.whole_models = s.deltas; // merged into the base by the swap baseline
  s.description = "tiny-base + 4 tiny fine-tunes (the base served too)";
  return s;
}

// Writes `dir` through a temporary folder beside it, so an interrupted run leaves nothing that
// looks finished.
void
write_once(const std::filesystem::path& dir, const std::function<void(const std::filesystem::path&)>& write) {
  if (std::filesystem::exists(dir / "config.json"))
    return;
  const auto partial = dir.string() + ".partial";
  std::filesystem::remove_all(partial);
  write(partial);
  std::filesystem::rename(partial, dir);
}

// Variant v's fine-tuned checkpoint and delta: written and compressed for the first `distinct`,
// copied from variant v mod distinct after them (separate files, so the page cache and the
// delta store hold them apart: served as fast as distinct ones, with the same outputs).
void
prepare_variant(const std::filesystem::path& root, const std::filesystem::path& base, int v, int distinct,
                const std::filesystem::path& checkpoint, const std::filesystem::path& delta) {
  const auto start = SteadyClock::now();
  if (std::filesystem::exists(delta / "delta_config.json"))
    return;
  if (v < distinct) {
    write_once(checkpoint, [&](const std::filesystem::path& dir) {
      model::write_random_finetune(base, dir, {}, 1000 + static_cast<std::uint64_t>(v));
    });
    compress_delta(base, checkpoint, "english", delta);
  } else {
    const auto source = fmt::format("{:02}", v % distinct);
    write_once(checkpoint, [&](const std::filesystem::path& dir) {
      std::filesystem::copy(root / ("finetune-" + source), dir, std::filesystem::copy_options::recursive);
    });
    std::filesystem::remove_all(delta.string() + ".partial");
    std::filesystem::copy(root / ("delta-" + source), delta.string() + ".partial",
                          std::filesystem::copy_options::recursive);
    std::filesystem::rename(delta.string() + ".partial", delta);
  }
  fmt::print("variant {:02}: fine-tune and delta {} in {:.0f} s\n", v, v < distinct ? "written" : "copied",
             std::chrono::duration<double>(SteadyClock::now() - start).count());
  std::fflush(stdout);
}

Served
real_shape_models(const std::string& preset, int variants, int distinct) {
  Served s;
  const auto root = kWork / preset;
  s.base = root / "base";
  write_once(s.base, [&](const std::filesystem::path& dir) {
    fmt::print("writing a random {} (BF16) to {} ...\n", preset, s.base.string());
    model::write_random_model(dir, model::preset_model_config(preset), model::DType::bf16, 1);
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) // tiny-base's: any ids below 128k serve
      std::filesystem::copy_file(kSource / "testdata" / "models" / "tiny-base" / file, dir / file);
  });
  for (int v = 0; v < variants; ++v) {
    const auto number = fmt::format("{:02}", v);
    const auto checkpoint = root / ("finetune-" + number), delta = root / ("delta-" + number);
    prepare_variant(root, s.base, v, distinct, checkpoint, delta);
    s.request_models.push_back(v);
    s.deltas.emplace_back("variant-" + number, delta);
    s.whole_models.emplace_back("variant-" + number, checkpoint);
  }
  s.description = fmt::format(
      "random {} BF16 base + {} random fine-tunes{} (requests for the fine-tunes only)", preset, variants,
      distinct < variants ? fmt::format(", {} distinct, the rest copies of them", distinct) : std::string());
  return s;
}

struct TraceRequest {
  double arrival_s;
  std::int32_t model; // -1 the base, 0.. the variants
  std::vector<runtime::TokenId> prompt;
};

// Poisson arrivals at `rate`; the model by `popularity` over `models` (Zipf-1.5: rank r drawn with
// weight r^-1.5, ranks shuffled by the random seed; uniform); prompts of 16–64 tokens cut from the
// held-out corpus.
std::vector<TraceRequest>
make_trace(int count, double rate, const std::string& popularity, std::vector<std::int32_t> models, std::uint32_t seed,
           const model::Tokenizer& tokenizer) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights;
  for (std::size_t rank = 1; rank <= models.size(); ++rank)
    weights.push_back(popularity == "uniform" ? 1.0 : std::pow(static_cast<double>(rank), -1.5));
  std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
  std::shuffle(models.begin(), models.end(), rng);
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
    trace.push_back({t, models[pick(rng)],
                     std::vector<runtime::TokenId>(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                                                   tokens.begin() + static_cast<std::ptrdiff_t>(at) + length(rng))});
  }
  return trace;
}

struct Result {
  double throughput = 0, mean_ttft = 0, p95_ttft = 0, makespan = 0;
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
  const auto deltas = serve::serve_beside(options, loaded, engine, "base"); // ids 0.., as the trace names them
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
  r.p95_ttft = t.empty() ? 0 : t[static_cast<std::size_t>(0.95 * static_cast<double>(t.size() - 1))];
  return r;
}

// Both ways of serving over `traces` traces (seeds seed, seed + 1, ...): tokens over summed
// makespans, the mean of the traces' mean and p95 TTFTs (each trace has the same request count).
struct Pair {
  Result decoupled, swap;
  std::int64_t failed = 0;
};

void
accumulate(Result& total, const Result& r, int traces) {
  total.tokens += r.tokens;
  total.makespan += r.makespan;
  total.throughput = static_cast<double>(total.tokens) / total.makespan;
  total.mean_ttft += r.mean_ttft / traces;
  total.p95_ttft += r.p95_ttft / traces;
  total.steps += r.steps;
  total.swaps += r.swaps;
  total.swap_seconds += r.swap_seconds;
  total.preemptions += r.preemptions;
  total.failed += r.failed;
}

Pair
run_rate(const Flags& flags, const Served& served, serve::ServeOptions options, const model::Tokenizer& tokenizer,
         const std::string& popularity, double rate, int requests, int output_tokens) {
  Pair pair;
  for (int t = 0; t < flags.traces; ++t) {
    const auto trace = make_trace(requests, rate, popularity, served.request_models,
                                  flags.seed + static_cast<std::uint32_t>(t), tokenizer);
    options.delta_serving = serve::DeltaServing::decoupled;
    options.deltas = served.deltas;
    options.engine.max_deltas = flags.max_deltas;
    accumulate(pair.decoupled, replay(options, tokenizer, trace, output_tokens), flags.traces);
    options.delta_serving = serve::DeltaServing::swap;
    options.deltas = served.whole_models;
    options.engine.max_deltas = 0; // the swap baseline sets its own (one model per step)
    accumulate(pair.swap, replay(options, tokenizer, trace, output_tokens), flags.traces);
  }
  pair.failed = pair.decoupled.failed + pair.swap.failed;
  return pair;
}

// One rate's figures, for the goals' summary.
struct RatePoint {
  double rate, offered, decoupled, swap; // req/s, tokens/s offered, tokens/s served
  double ttft_ratio;                     // decoupled / swap mean TTFT
  double throughput_ratio() const { return decoupled / swap; }
};

// The goals' figures over the rates: the swap baseline is saturated where it serves under 80 % of
// the offered tokens/s within 10 % of its highest throughput (its capacity); the ratio there and
// of the two capacities (goal >= 2x); the lowest throughput ratio (goal >= 1x) and the highest
// TTFT ratio (goal <= 0.5x) at any rate.
std::string
goals_summary(const std::vector<RatePoint>& points) {
  double swap_capacity = 0, decoupled_capacity = 0, lowest = INFINITY, highest_ttft = 0;
  for (const auto& p : points) {
    swap_capacity = std::max(swap_capacity, p.swap);
    decoupled_capacity = std::max(decoupled_capacity, p.decoupled);
    lowest = std::min(lowest, p.throughput_ratio());
    highest_ttft = std::max(highest_ttft, p.ttft_ratio);
  }
  std::string saturated;
  for (const auto& p : points)
    if (p.swap < 0.8 * p.offered && p.swap >= 0.9 * swap_capacity)
      saturated += fmt::format("{}{:.3g} req/s {:.2f}x", saturated.empty() ? "" : ", ", p.rate, p.throughput_ratio());
  return fmt::format("where the swap baseline is saturated (under 80 % of the offered load, within 10 % of its "
                     "highest throughput): decoupled / swap {} (goal >= 2x); highest throughputs {:.1f} vs {:.1f} "
                     "tok/s: {:.2f}x; decoupled / swap throughput >= {:.2f}x at every rate (goal >= 1x); mean TTFT "
                     "<= {:.2f}x at every rate (goal <= 0.5x)",
                     saturated.empty() ? std::string("at no rate here") : saturated, decoupled_capacity, swap_capacity,
                     decoupled_capacity / swap_capacity, lowest, highest_ttft);
}

void
print_row(const std::string& popularity, double rate, double offered, const char* way, const Result& r) {
  fmt::print("{:<10} {:>6.3g} {:>9.1f}  {:<10} {:>8.1f} {:>11.1f} {:>11.1f} {:>8.1f} {:>6} {:>5} ({:.1f} s)\n",
             popularity, rate, offered, way, r.throughput, r.mean_ttft * 1e3, r.p95_ttft * 1e3, r.makespan, r.steps,
             r.swaps, r.swap_seconds);
}

} // namespace

int
main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  const bool tiny = flags.shape == "tiny";
  const Served served =
      tiny ? tiny_models()
           : real_shape_models(flags.shape, flags.variants,
                               flags.distinct > 0 ? std::min(flags.distinct, flags.variants) : flags.variants);
  if (flags.prepare_only)
    return 0;
  const int requests = flags.requests > 0 ? flags.requests : tiny ? 200 : 48;
  const int output_tokens = flags.output_tokens > 0 ? flags.output_tokens : tiny ? 32 : 64;
  const auto rates = !flags.rates.empty() ? flags.rates
                     : tiny               ? std::vector<double>{20, 60, 150, 300}
                                          : std::vector<double>{0.125, 0.25, 0.5, 1};
  serve::ServeOptions options;
  options.base = served.base;
  options.threads = flags.threads;
  options.device = serve::parse_device(flags.device, "device");
  options.engine.max_num_seqs = 64;
  const auto tokenizer = model::Tokenizer::load_folder(options.base);
  fmt::print("{}; {} requests per trace, {} trace(s) from seed {}, Poisson arrivals, {} output tokens each; the "
             "step on {}\n",
             served.description, requests, flags.traces, flags.seed, output_tokens,
             options.device < 0 ? std::string("the CPU") : fmt::format("CUDA device {}", options.device));
  fmt::print("{:<10} {:>6} {:>9}  {:<10} {:>8} {:>11} {:>11} {:>8} {:>6} {:>5}\n", "popularity", "req/s", "offer t/s",
             "serving", "tok/s", "TTFT mean", "TTFT p95", "makespan", "steps", "swaps");
  fmt::print("{:<10} {:>6} {:>9}  {:<10} {:>8} {:>11} {:>11} {:>8} {:>6} {:>5}\n", "", "", "", "", "", "ms", "ms", "s",
             "", "(time)");
  std::int64_t failed = 0;
  std::vector<std::string> summaries;
  for (const auto& popularity : flags.popularities) {
    std::vector<RatePoint> points;
    for (const double rate : rates) {
      const auto pair = run_rate(flags, served, options, tokenizer, popularity, rate, requests, output_tokens);
      failed += pair.failed;
      const double offered = rate * output_tokens;
      print_row(popularity, rate, offered, "decoupled", pair.decoupled);
      print_row(popularity, rate, offered, "swap", pair.swap);
      const RatePoint point{rate, offered, pair.decoupled.throughput, pair.swap.throughput,
                            pair.decoupled.mean_ttft / pair.swap.mean_ttft};
      fmt::print("{:<10} {:>6.3g} {:>9}  decoupled / swap: throughput {:.2f}x, mean TTFT {:.2f}x, p95 TTFT {:.2f}x\n",
                 popularity, rate, "", point.throughput_ratio(), point.ttft_ratio,
                 pair.decoupled.p95_ttft / pair.swap.p95_ttft);
      points.push_back(point);
    }
    summaries.push_back(popularity + ": " + goals_summary(points));
  }
  for (const auto& line : summaries)
    fmt::print("{}\n", line);
  return failed == 0 ? 0 : 1;
}
