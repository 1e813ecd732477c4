// CPU runtime speed on a random-weight model of Llama-3.2-1B's shape, in BF16 and F32:
// prefill and decode tokens/s at batch 1 and 16, and decode's achieved memory bandwidth (weight
// bytes streamed per step / step time) as a fraction of the read bandwidth (optkit doctor's
// measure) in the same run with the same threads. Prints figures; asserts nothing.
//   perf_runtime [--preset llama-3.2-1b] [--dtype BF16|F32] [--threads N] [--prefill 128] [--decode-steps 8]
//                [--dir /tmp/...] [--batches 1,16] [--runs 3] [--weights map|read]
// --weights read: the weights read into memory on huge pages (optkit's --no-mmap), as llama-bench's
// --load-mode none holds them; map (the default): the safetensors mapped, zero copy.
// BF16 weights run in both activation modes (--activations fp32, the default, and bf16); every
// figure is the median of --runs runs.
// Side by side with llama.cpp, in the same run: with LLAMA_BENCH=<llama-bench binary> it also
// converts the same random weights to GGUF (TO_GGUF=<to_gguf.py>, GGUF_PY=<llama.cpp>/gguf-py, run
// with /usr/bin/python3; not part of optkit) and runs llama-bench on them with the same threads,
// prompt length and weights in ordinary memory (--load-mode none), printing optkit ÷ llama.cpp.
// llama.cpp is a measuring stick only: nothing of it is in optkit's build.
#include "core/thread_pool.hpp"
#include "doctor/probes.hpp"
#include "model/random_model.hpp"
#include "quant/quantizer.hpp"
#include "runtime/dot_rows.hpp"
#include "runtime/int8_gemm.hpp"
#include "runtime/kernels.hpp"
#include "runtime/linear_weight.hpp"
#include "runtime/panel_gemm.hpp"
#include "runtime/quantized_weight.hpp"
#include "runtime/transformer.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <thread>

using namespace optkit;
using runtime::SequenceInput;
using runtime::TokenId;

namespace {

double
now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The fastest of five runs of `run`, in seconds.
double
best_seconds(const std::function<void()>& run) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now();
    run();
    best = std::min(best, now() - t0);
  }
  return best;
}

// The machine's read bandwidth as optkit doctor measures it (eight streams per thread over 2.5x the
// L3 cache), with the same threads: the denominator of decode's fractions.
double
read_gbps(unsigned threads) {
  static std::vector<std::uint64_t> stream(doctor::streaming_bytes() / sizeof(std::uint64_t), 1);
  ThreadPool pool(threads);
  return doctor::read_bandwidth_gbps(stream, pool);
}

// One decode-shaped product alone (m = 1, W the size of Llama-3.2-1B's LM head) for each dtype:
// the bandwidth the kernel reaches without the rest of the layer around it.
double
gemv_gbps(model::DType dtype, unsigned threads) {
  const std::int64_t rows = 128256, cols = 2048;
  std::vector<std::byte> w(static_cast<std::size_t>(rows * cols) * model::dtype_size(dtype), std::byte{0x3c});
  const auto weight = runtime::make_dense_weight(dtype, w, rows, cols);
  std::vector<float> x(static_cast<std::size_t>(cols), 0.5f), y(static_cast<std::size_t>(rows));
  ThreadPool pool(threads);
  double best = 1e30;
  for (int rep = 0; rep < 10; ++rep) {
    const double t0 = now();
    weight->multiply(x.data(), 1, y.data(), pool);
    best = std::min(best, now() - t0);
  }
  return static_cast<double>(w.size()) / best / 1e9;
}

// One prefill-shaped product alone (128 activation rows, W 8192 x 2048 like Llama-3.2-1B's
// gate_proj) on each path the runtime has: GFLOP/s of the AVX-512 panel kernels — BF16 with split
// activations (--activations fp32, the default) and rounded ones (--activations bf16, llama.cpp's
// numerics), F32 with FMA — beside the OpenBLAS paths they replace (BF16 widened + sgemm, F32 sgemm).
// BF16 as the runtime multiplies it (a dense weight: its panels packed at load where the CPU
// prefers that) and, for comparison, with W left in rows and packed into panels per product.
struct GemmFigures {
  double bf16_split = 0, bf16_rounded = 0, bf16_split_rows = 0, bf16_rounded_rows = 0, bf16_widened = 0, f32_panel = 0,
         f32_sgemm = 0;
};

GemmFigures
gemm_gflops(unsigned threads) {
  const std::int64_t m = 128, rows = 8192, cols = 2048;
  const double flops = 2.0 * static_cast<double>(m * rows * cols);
  std::vector<runtime::Bf16> w16(static_cast<std::size_t>(rows * cols));
  std::vector<float> w32(w16.size()), x(static_cast<std::size_t>(m * cols)), y(static_cast<std::size_t>(m * rows));
  for (std::size_t i = 0; i < w16.size(); ++i) {
    w32[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 64.0f;
    w16[i].bits = model::float_to_bf16(w32[i]);
  }
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i % 13) - 6) / 8.0f;
  ThreadPool pool(threads);
  const auto best_of = [&](const std::function<void()>& run) { return flops / best_seconds(run) / 1e9; };
  const auto panel = [&](const auto* w, runtime::PanelProduct product) {
    if (!runtime::panel_gemm_supported(product))
      return 0.0;
    return best_of([&] {
      const auto packed = runtime::pack_activations(x.data(), m, cols, product);
      pool.parallel_for(
          rows, [&](std::int64_t r0, std::int64_t r1) { runtime::panel_gemm_rows(w, r0, r1, packed, y.data(), rows); },
          packed.kernel == runtime::PanelKernel::f32_transposed ? 96 : 64); // as the runtime splits them
    });
  };
  const auto bf16_weight = runtime::make_dense_weight(model::DType::bf16, std::as_bytes(std::span(w16)), rows, cols);
  GemmFigures g;
  g.bf16_widened = best_of([&] { runtime::multiply_widened(*bf16_weight, x.data(), m, y.data(), pool); });
  g.f32_sgemm = best_of([&] { runtime::multiply_fp32_rows(w32.data(), rows, cols, x.data(), m, y.data(), pool); });
  const auto runtime_bf16 = [&](runtime::ActivationPrecision activations) {
    const auto weight =
        runtime::make_dense_weight(model::DType::bf16, std::as_bytes(std::span(w16)), rows, cols, activations);
    return best_of([&] { weight->multiply(x.data(), m, y.data(), pool); });
  };
  g.bf16_split = runtime_bf16(runtime::ActivationPrecision::fp32);
  g.bf16_rounded = runtime_bf16(runtime::ActivationPrecision::bf16);
  g.bf16_split_rows = panel(w16.data(), runtime::PanelProduct::bf16_split);
  g.bf16_rounded_rows = panel(w16.data(), runtime::PanelProduct::bf16_rounded);
  g.f32_panel = panel(w32.data(), runtime::PanelProduct::f32);
  return g;
}

// W8A8 (int8 weights with per-row scales, int8 activations per token), as compress int_w8a8
// writes it: the runtime's integer kernel (VPDPBUSD where the CPU has AVX512_VNNI) against the
// float path it replaces (activations fake-quantized, weight rows widened, sgemm), one prefill-
// shaped product (128 x 8192 x 2048) in GFLOP/s and one decode-shaped one (one row against the
// LM head's shape) in GB/s of int8 weights.
struct W8a8Figures {
  double gemm_int = 0, gemm_float = 0, gemv_int = 0, gemv_float = 0;
};

W8a8Figures
w8a8_figures(unsigned threads) {
  W8a8Figures f;
  if (!runtime::int8_gemm_supported())
    return f;
  ThreadPool pool(threads);
  const quant::QuantArgs per_token{8, quant::NumberType::integer, true, quant::Strategy::token, 0, true};
  const auto run = [&](std::int64_t m, std::int64_t rows, std::int64_t cols, double& integer, double& widened) {
    std::vector<std::int8_t> w(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = static_cast<std::int8_t>(static_cast<int>(i % 251) - 125);
    const auto weight = runtime::make_quantized_weight(
        {runtime::QuantizedStorage::int8_values, rows, cols, 8, std::as_bytes(std::span(w)),
         std::vector<float>(static_cast<std::size_t>(rows), 0.01f), cols, per_token});
    std::vector<float> x(static_cast<std::size_t>(m * cols)), y(static_cast<std::size_t>(m * rows));
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(static_cast<int>(i % 13) - 6) / 8.0f;
    const double t_int = best_seconds([&] { weight->multiply(x.data(), m, y.data(), pool); });
    const double t_float = best_seconds([&] {
      std::vector<float> fake = x;
      quant::fake_quantize_activations(fake.data(), m, cols, per_token);
      runtime::multiply_widened(*weight, fake.data(), m, y.data(), pool);
    });
    const double work = m == 1 ? static_cast<double>(rows * cols) : 2.0 * static_cast<double>(m * rows * cols);
    integer = work / t_int / 1e9;
    widened = work / t_float / 1e9;
  };
  run(128, 8192, 2048, f.gemm_int, f.gemm_float);
  run(1, 128256, 2048, f.gemv_int, f.gemv_float);
  return f;
}

// What llama-bench measured on one GGUF file: prompt-processing and generation tokens/s.
struct LlamaBench {
  double prefill_tps = 0, decode_tps = 0;
  std::string error;
};

std::string
run_command(const std::string& command, int& status) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return output;
  }
  char buffer[4096];
  while (const std::size_t n = fread(buffer, 1, sizeof buffer, pipe))
    output.append(buffer, n);
  status = pclose(pipe);
  return output;
}

LlamaBench
llama_bench(const std::filesystem::path& model_dir, model::DType dtype, unsigned threads, std::size_t prefill,
            int decode_steps) {
  LlamaBench result;
  const char* bench = std::getenv("LLAMA_BENCH");
  const char* to_gguf = std::getenv("TO_GGUF");
  if (bench == nullptr)
    return result;
  const auto gguf = model_dir / "model.gguf";
  int status = 0;
  if (!std::filesystem::exists(gguf)) {
    if (to_gguf == nullptr) {
      result.error = "set TO_GGUF (and GGUF_PY) to convert the model for llama-bench";
      return result;
    }
    const std::string convert =
        fmt::format("/usr/bin/python3 '{}' '{}' '{}' --outtype {} 2>&1", to_gguf, model_dir.string(), gguf.string(),
                    dtype == model::DType::bf16 ? "bf16" : "f32");
    const auto out = run_command(convert, status);
    if (status != 0) {
      result.error = "GGUF conversion failed: " + out.substr(out.size() > 400 ? out.size() - 400 : 0);
      return result;
    }
  }
  const std::string command = fmt::format("'{}' -m '{}' -p {} -n {} -t {} -r 1 --load-mode none -o json 2>/dev/null",
                                          bench, gguf.string(), prefill, decode_steps, threads);
  const auto out = run_command(command, status);
  try {
    for (const auto& test : nlohmann::json::parse(out)) {
      const double tps = test.at("avg_ts").get<double>();
      if (test.at("n_prompt").get<int>() > 0)
        result.prefill_tps = tps;
      else
        result.decode_tps = tps;
    }
  } catch (const std::exception& e) {
    result.error = fmt::format("llama-bench exit {}, output not JSON ({}): {}", status, e.what(), out.substr(0, 300));
  }
  return result;
}

std::vector<TokenId>
prompt(std::size_t length, int seed) {
  std::vector<TokenId> ids(length);
  for (std::size_t i = 0; i < length; ++i)
    ids[i] = static_cast<TokenId>((seed * 7919 + static_cast<int>(i) * 104729) % 128000);
  return ids;
}

struct Figures {
  double prefill_tps = 0, decode_tps = 0, decode_step_s = 0;
};

double
median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

Figures
measure(runtime::CpuTransformer& model, int batch, std::size_t prefill_len, int decode_steps) {
  std::vector<std::vector<TokenId>> prompts;
  std::vector<SequenceInput> inputs;
  for (int b = 0; b < batch; ++b)
    prompts.push_back(prompt(prefill_len, b));
  for (int b = 0; b < batch; ++b)
    inputs.push_back({model.add_sequence(), prompts[static_cast<std::size_t>(b)], false});
  const double t0 = now();
  auto logits = model.forward(inputs);
  const double prefill_s = now() - t0;
  std::vector<TokenId> next(static_cast<std::size_t>(batch), 1);
  double decode_s = 0;
  for (int step = 0; step < decode_steps; ++step) {
    std::vector<SequenceInput> step_inputs;
    for (int b = 0; b < batch; ++b)
      step_inputs.push_back(
          {inputs[static_cast<std::size_t>(b)].sequence, std::span(&next[static_cast<std::size_t>(b)], 1), false});
    const double s0 = now();
    logits = model.forward(step_inputs);
    if (step > 0) // the first step warms caches and page tables
      decode_s += now() - s0;
  }
  for (const auto& in : inputs)
    model.remove_sequence(in.sequence);
  Figures f;
  f.prefill_tps = static_cast<double>(batch) * static_cast<double>(prefill_len) / prefill_s;
  f.decode_step_s = decode_s / (decode_steps - 1);
  f.decode_tps = batch / f.decode_step_s;
  return f;
}

} // namespace

int
main(int argc, char** argv) {
  std::string preset = "llama-3.2-1b";
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "optkit-perf-models";
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::size_t prefill = 128;
  int decode_steps = 8;
  std::optional<model::DType> only_dtype;
  std::vector<int> batches{1, 16};
  int runs = 3;
  auto weights = model::LoadMode::map;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--preset")
      preset = value;
    else if (flag == "--threads")
      threads = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--prefill")
      prefill = std::stoul(value);
    else if (flag == "--decode-steps")
      decode_steps = std::max(2, std::stoi(value));
    else if (flag == "--weights")
      weights = value == "read" ? model::LoadMode::read : model::LoadMode::map;
    else if (flag == "--runs")
      runs = std::max(1, std::stoi(value));
    else if (flag == "--dir")
      dir = value;
    else if (flag == "--dtype")
      only_dtype = model::parse_dtype(value);
    else if (flag == "--batches") {
      batches.clear();
      for (std::size_t at = 0; at < value.size();) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        batches.push_back(std::stoi(value.substr(at, comma - at)));
        at = comma + 1;
      }
    }
  }
  // The read bandwidth is measured before, between and after the model runs; the best figure is
  // the denominator of every fraction, so a noisy neighbour can only make the fractions smaller.
  std::vector<double> copies{read_gbps(threads)};
  const double gemv_bf16 = gemv_gbps(model::DType::bf16, threads), gemv_f32 = gemv_gbps(model::DType::f32, threads);
  const auto gemm = gemm_gflops(threads);
  const auto w8a8 = w8a8_figures(threads);
  // Each configuration the runtime has for a dtype: BF16 weights in both activation modes (fp32,
  // the default, and bf16), F32 weights as they are. Every figure is the median of `runs` runs,
  // the runs of optkit's modes and llama-bench interleaved so drift on a shared machine hits all
  // of them alike.
  struct Row {
    model::DType dtype;
    runtime::ActivationPrecision activations;
    int batch;
    Figures figures;
    double gbps;
    double load_s; // the model's construction (BF16 packing included where the CPU packs)
  };
  std::vector<Row> rows;
  std::vector<std::pair<model::DType, LlamaBench>> llama;
  for (const auto dtype : {model::DType::bf16, model::DType::f32}) {
    if (only_dtype && dtype != *only_dtype)
      continue;
    const auto path = dir / fmt::format("{}-{}", preset, model::dtype_name(dtype));
    if (!std::filesystem::exists(path / "config.json")) {
      fmt::print("writing random {} model to {} ...\n", model::dtype_name(dtype), path.string());
      model::write_random_model(path, model::preset_model_config(preset), dtype, 1);
    }
    std::vector<runtime::ActivationPrecision> modes{runtime::ActivationPrecision::fp32};
    if (dtype == model::DType::bf16)
      modes.push_back(runtime::ActivationPrecision::bf16);
    std::vector<std::unique_ptr<runtime::CpuTransformer>> models;
    std::vector<double> load_s;
    for (const auto mode : modes) {
      const double t0 = now();
      models.push_back(std::make_unique<runtime::CpuTransformer>(
          path, runtime::RuntimeOptions{.threads = threads, .activations = mode, .weight_loading = weights}));
      load_s.push_back(now() - t0);
      measure(*models.back(), 1, 8, 2); // touches every weight page once, so no timing includes page faults
    }
    const double weight_gb = static_cast<double>(models.front()->weight_bytes()) / 1e9;
    std::vector<std::vector<Figures>> samples(modes.size() * batches.size());
    std::vector<double> llama_prefill, llama_decode;
    LlamaBench llama_run;
    for (int run = 0; run < runs; ++run) {
      for (std::size_t k = 0; k < modes.size(); ++k)
        for (std::size_t b = 0; b < batches.size(); ++b) {
          // batch 16 prefills shorter prompts to keep the run short; tokens/s is what is compared
          const int batch = batches[b];
          samples[k * batches.size() + b].push_back(
              measure(*models[k], batch, batch == 1 ? prefill : prefill / 4, decode_steps));
        }
      llama_run = llama_bench(path, dtype, threads, prefill, 64);
      if (llama_run.prefill_tps > 0) {
        llama_prefill.push_back(llama_run.prefill_tps);
        llama_decode.push_back(llama_run.decode_tps);
      }
    }
    for (std::size_t k = 0; k < modes.size(); ++k)
      for (std::size_t b = 0; b < batches.size(); ++b) {
        const auto& runs_of = samples[k * batches.size() + b];
        std::vector<double> prefill_tps, decode_step_s;
        for (const auto& f : runs_of) {
          prefill_tps.push_back(f.prefill_tps);
          decode_step_s.push_back(f.decode_step_s);
        }
        Figures f;
        f.prefill_tps = median(prefill_tps);
        f.decode_step_s = median(decode_step_s);
        f.decode_tps = batches[b] / f.decode_step_s;
        rows.push_back({dtype, modes[k], batches[b], f, weight_gb / f.decode_step_s, load_s[k]});
      }
    if (!llama_prefill.empty()) {
      llama_run.prefill_tps = median(llama_prefill);
      llama_run.decode_tps = median(llama_decode);
    }
    llama.emplace_back(dtype, llama_run);
    copies.push_back(read_gbps(threads));
  }
  const double copy = *std::max_element(copies.begin(), copies.end());
  fmt::print("model {}, {} threads, weights {}, medians of {} runs; row-dot kernel {}; BF16 kernel {}; "
             "attention {}\n",
             preset, threads, weights == model::LoadMode::read ? "read into memory (--no-mmap)" : "mapped", runs,
             runtime::dot_rows_kernel(), runtime::bf16_gemm_kernel_name(), runtime::attention_kernel());
  fmt::print("STREAM-style read: {:.1f} GB/s best of {} measurements ({:.1f} .. {:.1f})\n", copy, copies.size(),
             *std::min_element(copies.begin(), copies.end()), copy);
  fmt::print("GEMV alone (128256 x 2048, one activation row): BF16 {:.1f} GB/s ({:.0f}%), F32 {:.1f} GB/s ({:.0f}%)\n",
             gemv_bf16, 100.0 * gemv_bf16 / copy, gemv_f32, 100.0 * gemv_f32 / copy);
  fmt::print("GEMM alone (128 x 8192 x 2048), GFLOP/s: BF16 (the runtime's) {:.0f} with split activations "
             "(the default) / {:.0f} rounded (--activations bf16); W in rows, panels packed per product {:.0f} / "
             "{:.0f}; widened + sgemm {:.0f}; F32 (the runtime's kernel) {:.0f}, sgemm {:.0f}\n",
             gemm.bf16_split, gemm.bf16_rounded, gemm.bf16_split_rows, gemm.bf16_rounded_rows, gemm.bf16_widened,
             gemm.f32_panel, gemm.f32_sgemm);
  if (w8a8.gemm_int > 0)
    fmt::print("W8A8 (int8 per-row W, int8 per-token activations): integer VNNI kernel {:.0f} GFLOP/s at 128 x 8192 x "
               "2048, {:.1f} GB/s at one row x 128256 x 2048; the float path it replaces {:.0f} GFLOP/s, {:.1f} GB/s\n",
               w8a8.gemm_int, w8a8.gemv_int, w8a8.gemm_float, w8a8.gemv_float);
  else
    fmt::print("W8A8: no AVX512_VNNI here, the float path serves it\n");
  fmt::print("{:<6} {:>11} {:>5} {:>14} {:>14} {:>12} {:>14} {:>8}\n", "dtype", "activations", "batch", "prefill tok/s",
             "decode tok/s", "decode GB/s", "of read BW", "load s");
  for (const auto& r : rows)
    fmt::print("{:<6} {:>11} {:>5} {:>14.1f} {:>14.2f} {:>12.1f} {:>13.0f}% {:>8.2f}\n", model::dtype_name(r.dtype),
               runtime::activation_precision_name(r.activations), r.batch, r.figures.prefill_tps, r.figures.decode_tps,
               r.gbps, 100.0 * r.gbps / copy, r.load_s);
  for (const auto& [dtype, l] : llama) {
    if (!l.error.empty()) {
      fmt::print("llama-bench {}: {}\n", model::dtype_name(dtype), l.error);
      continue;
    }
    if (l.prefill_tps <= 0)
      continue;
    fmt::print("llama-bench {} (same weights, {} threads, -p {} -n 64, --load-mode none, median of {} runs): prefill "
               "{:.1f} tok/s, decode {:.2f} tok/s\n",
               model::dtype_name(dtype), threads, prefill, runs, l.prefill_tps, l.decode_tps);
    for (const auto& r : rows)
      if (r.dtype == dtype && r.batch == 1)
        fmt::print(
            "  optkit / llama.cpp, {} activations: prefill {:.2f}x, decode {:.2f}x (decode at {:.0f}% of the read "
            "bandwidth)\n",
            runtime::activation_precision_name(r.activations), r.figures.prefill_tps / l.prefill_tps,
            r.figures.decode_tps / l.decode_tps, 100.0 * r.gbps / copy);
  }
  return 0;
}
