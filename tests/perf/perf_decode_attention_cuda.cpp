// Decode attention on a CUDA device, the grouped kernel against the staged one in one run, on the
// GQA shapes of the presets (cuda/decode_attention.cu; OPTKIT_DECODE_ATTENTION picks the path):
// microseconds, cache read bandwidth, and each path's largest error against the CPU in double
// precision. Usage: perf_decode_attention_cuda [device, default 0]
#include "cuda/operator_profiler.cuh"
#include "support/perf_args.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

using namespace optkit;

namespace {

struct Shape {
  const char* model;
  int heads, kv_heads, head_dim, batch, kv_len;
};

} // namespace

int
main(int argc, char** argv) {
  const int device =
      test::positional_number(argc, argv, 1, "device", 0, 0, "perf_decode_attention_cuda [device, default 0]");
  const Shape shapes[] = {
      {"llama-3.1-8b", 32, 8, 128, 64, 1024},  {"llama-3.1-8b", 32, 8, 128, 1, 4096},
      {"qwen2.5-7b", 28, 4, 128, 64, 1024},    {"qwen2.5-7b", 28, 4, 128, 16, 2048},
      {"qwen2.5-7b", 28, 4, 128, 1, 4096},     {"qwen2.5-14b", 40, 8, 128, 64, 1024},
      {"llama-3.1-70b", 64, 8, 128, 64, 1024}, {"qwen2.5-0.5b", 14, 2, 64, 64, 1024},
      {"gemma-like", 16, 1, 256, 64, 1024},    {"group-2", 16, 8, 128, 64, 1024},
  };
  int failures = 0;
  try {
    cuda::OperatorProfiler profiler(device);
    fmt::print("{}: decode attention, BF16 cache; TB/s = K and V bytes read / time\n", profiler.device_name());
    fmt::print("{:<14} {:>5} {:>3} {:>4} {:>5} {:>6}   {:>18}   {:>18}   {:>7}   {:>17}\n", "model", "heads", "kv",
               "hd", "batch", "kv_len", "grouped us (TB/s)", "staged us (TB/s)", "speedup", "max error g / s");
    for (const Shape& s : shapes) {
      const double bytes = 2.0 * s.batch * s.kv_heads * double(s.kv_len) * s.head_dim * 2;
      double us[2], error[2];
      const char* paths[2] = {"grouped", "staged"};
      for (int p = 0; p < 2; ++p) {
        setenv("OPTKIT_DECODE_ATTENTION", paths[p], 1);
        us[p] = profiler.attention_decode_us(s.batch, s.kv_len, s.heads, s.kv_heads, s.head_dim);
        error[p] = profiler.attention_decode_max_error(std::min(s.batch, 4), std::min(s.kv_len, 1500), s.heads,
                                                       s.kv_heads, s.head_dim);
        failures += error[p] < 2e-2 ? 0 : 1;
      }
      unsetenv("OPTKIT_DECODE_ATTENTION");
      fmt::print("{:<14} {:>5} {:>3} {:>4} {:>5} {:>6}   {:>9.1f} ({:>5.2f})   {:>9.1f} ({:>5.2f})   {:>6.2f}x   "
                 "{:>8.1e} / {:>7.1e}\n",
                 s.model, s.heads, s.kv_heads, s.head_dim, s.batch, s.kv_len, us[0], bytes / us[0] / 1e6, us[1],
                 bytes / us[1] / 1e6, us[0] / us[1], error[0], error[1]);
    }
    // Accuracy alone over small shapes around the GQA groups and head sizes of the table.
    const Shape checks[] = {{"hd64 g7 1 split", 14, 2, 64, 1, 64}, {"hd64 g7", 14, 2, 64, 1, 1024},
                            {"hd64 g7 b4", 14, 2, 64, 4, 1024},    {"hd64 g7 kv1", 7, 1, 64, 1, 1024},
                            {"hd64 g8 kv1", 8, 1, 64, 1, 1024},    {"hd64 g4 kv1", 4, 1, 64, 1, 1024},
                            {"hd64 g2", 16, 8, 64, 4, 1024},       {"hd64 g7 kv4", 28, 4, 64, 2, 1024},
                            {"hd128 g7 kv2", 14, 2, 128, 4, 1024}, {"hd256 g16", 16, 1, 256, 2, 300},
                            {"hd256 g8", 8, 1, 256, 2, 300},       {"hd128 g16", 32, 2, 128, 2, 300}};
    fmt::print("\nmax error against the CPU (grouped / staged):\n");
    for (const Shape& s : checks) {
      double error[2];
      const char* paths[2] = {"grouped", "staged"};
      for (int p = 0; p < 2; ++p) {
        setenv("OPTKIT_DECODE_ATTENTION", paths[p], 1);
        error[p] = profiler.attention_decode_max_error(s.batch, s.kv_len, s.heads, s.kv_heads, s.head_dim);
      }
      unsetenv("OPTKIT_DECODE_ATTENTION");
      fmt::print("{:<18} heads {:>3} kv {:>2} hd {:>3} batch {:>2} kv_len {:>5}   {:>8.1e} / {:>8.1e}\n", s.model,
                 s.heads, s.kv_heads, s.head_dim, s.batch, s.kv_len, error[0], error[1]);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "perf_decode_attention_cuda: {}\n", e.what());
    return 3;
  }
  return failures == 0 ? 0 : 1;
}
