// Benchmark for GPTQ (optkit compress): one [rows, cols] layer, int4 groups of 128 with act-order,
// against the straightforward PyTorch CPU implementation in tests/oracles/gptq_reference.py on the
// same machine in the same run. Python builds the inputs (X of `tokens` rows, W), times its
// Hessian and GPTQ, and saves W, H and its result; optkit times its Hessian on an input of the
// same shape and its GPTQ on Python's very W and H, so the two reconstruction errors are
// comparable. Prints seconds, the ratio and peak memory; asserts nothing.
//   perf_gptq [ROWS COLS TOKENS]   (default 4096 4096 262144 = 128 sequences x 2048 tokens)
#include "core/blas_threads.hpp"
#include "core/thread_pool.hpp"
#include "model/safetensors.hpp"
#include "quant/gptq.hpp"
#include "quant/hessian.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <sys/resource.h>
#include <thread>

using namespace optkit;

namespace {

double
seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<float>
tensor(const model::SafetensorsFile& file, const char* name) {
  const auto view = file.find(name);
  std::vector<float> out(view.element_count());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = view.at(i);
  return out;
}

double
peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

} // namespace

int
main(int argc, char** argv) {
  const std::int64_t rows = argc > 3 ? std::stoll(argv[1]) : 4096;
  const std::int64_t cols = argc > 3 ? std::stoll(argv[2]) : 4096;
  const std::int64_t tokens = argc > 3 ? std::stoll(argv[3]) : 262144;
  const auto reference = std::filesystem::temp_directory_path() / fmt::format("optkit-gptq-{}.safetensors", ::getpid());
  const auto script = std::filesystem::path(OPTKIT_SOURCE_DIR) / "tests" / "oracles" / "gptq_reference.py";
  const auto command =
      fmt::format("/usr/bin/python3 {} time {} {} {} {}", script.string(), rows, cols, tokens, reference.string());
  fmt::print("GPTQ int4 g128 act-order, W [{}, {}], {} calibration tokens, {} hardware threads\n", rows, cols, tokens,
             std::thread::hardware_concurrency());
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) {
    fmt::print(stderr, "cannot run {}\n", command);
    return 1;
  }
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe))
    output += buffer;
  if (::pclose(pipe) != 0) {
    fmt::print(stderr, "the PyTorch reference failed (needs Debian's python3-torch): {}\n", output);
    return 1;
  }
  const auto torch = nlohmann::json::parse(output);

  const int threads = static_cast<int>(std::thread::hardware_concurrency());
  double hessian_s = 0;
  {
    std::vector<float> x(static_cast<std::size_t>(tokens * cols));
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (auto& v : x)
      v = normal(rng);
    quant::Hessian h(cols);
    ScopedBlasThreads blas(threads);
    const auto start = std::chrono::steady_clock::now();
    const std::int64_t chunk = 8192; // as the layer-wise pipeline feeds it
    for (std::int64_t t = 0; t < tokens; t += chunk)
      h.add(x.data() + t * cols, std::min(chunk, tokens - t), 1);
    const auto matrix = h.matrix();
    hessian_s = seconds_since(start);
  }
  const model::SafetensorsFile file(reference);
  const auto w = tensor(file, "W"), q_torch = tensor(file, "Q");
  auto h = tensor(file, "H");
  std::filesystem::remove(reference);
  ThreadPool pool(static_cast<unsigned>(threads));
  quant::QuantArgs int4{4, quant::NumberType::integer, true, quant::Strategy::group, 128, false};
  quant::GptqOptions options;
  options.act_order = true;
  ScopedBlasThreads blas(threads);
  const auto start = std::chrono::steady_clock::now();
  const auto result = quant::gptq(w, rows, cols, h, int4, model::DType::bf16, options, pool);
  const double gptq_s = seconds_since(start);
  const double ours_error = quant::relative_output_error(w, result.weight, rows, cols, h);
  const double torch_error = quant::relative_output_error(w, q_torch, rows, cols, h);

  const double torch_total = torch.at("total_s").get<double>();
  fmt::print("{:<22} {:>10} {:>10} {:>10} {:>14} {:>12}\n", "", "hessian s", "gptq s", "total s", "rel. error",
             "peak MiB");
  fmt::print("{:<22} {:>10.2f} {:>10.2f} {:>10.2f} {:>14.6g} {:>12.0f}\n", "PyTorch (reference)",
             torch.at("hessian_s").get<double>(), torch.at("gptq_s").get<double>(), torch_total, torch_error,
             torch.at("peak_rss_mib").get<double>());
  fmt::print("{:<22} {:>10.2f} {:>10.2f} {:>10.2f} {:>14.6g} {:>12.0f}\n", "optkit", hessian_s, gptq_s,
             hessian_s + gptq_s, ours_error, peak_rss_mib());
  fmt::print("speed-up: {:.2f}x overall ({:.2f}x Hessian, {:.2f}x GPTQ); error ratio optkit/PyTorch {:.4f}\n",
             torch_total / (hessian_s + gptq_s), torch.at("hessian_s").get<double>() / hessian_s,
             torch.at("gptq_s").get<double>() / gptq_s, ours_error / torch_error);
  return 0;
}
