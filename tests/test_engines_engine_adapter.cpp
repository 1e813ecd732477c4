#include "engines/engine_adapter.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace optkit::engines;

namespace {

bool
has_pair(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  const auto it = std::find(argv.begin(), argv.end(), flag);
  return it != argv.end() && it + 1 != argv.end() && *(it + 1) == value;
}

EngineSettings
settings() {
  EngineSettings s;
  s.model = "Qwen/Qwen3-235B-A22B";
  s.port = 8123;
  s.tensor_parallel = 4;
  s.data_parallel = 2;
  s.expert_parallel = 8;
  s.max_num_seqs = 128;
  s.max_num_batched_tokens = 4096;
  s.max_model_len = 8192;
  s.memory_fraction = 0.85;
  s.kv_cache_dtype = "fp8";
  s.speculative_tokens = 3;
  return s;
}

} // namespace

TEST_CASE("each engine spells the same settings in its own flags") {
  const auto vllm = command_line(EngineKind::vllm, settings()).argv();
  CHECK(vllm[0] == "vllm");
  CHECK(vllm[2] == "Qwen/Qwen3-235B-A22B");
  CHECK(has_pair(vllm, "--tensor-parallel-size", "4"));
  CHECK(has_pair(vllm, "--data-parallel-size", "2"));
  CHECK(std::count(vllm.begin(), vllm.end(), "--enable-expert-parallel") == 1);
  CHECK(has_pair(vllm, "--max-num-seqs", "128"));
  CHECK(has_pair(vllm, "--max-num-batched-tokens", "4096"));
  CHECK(has_pair(vllm, "--gpu-memory-utilization", "0.85"));
  CHECK(has_pair(vllm, "--kv-cache-dtype", "fp8"));
  CHECK(has_pair(vllm, "--speculative-config", R"({"method":"eagle","num_speculative_tokens":3})"));

  const auto sglang = command_line(EngineKind::sglang, settings()).argv();
  CHECK(has_pair(sglang, "--tp-size", "8")); // SGLang counts every GPU of the worker
  CHECK(has_pair(sglang, "--dp-size", "2"));
  CHECK(has_pair(sglang, "--max-running-requests", "128"));
  CHECK(has_pair(sglang, "--kv-cache-dtype", "fp8_e4m3"));
  CHECK(has_pair(sglang, "--mem-fraction-static", "0.85"));

  const auto trt = command_line(EngineKind::trtllm, settings(), "opts.yaml");
  CHECK(has_pair(trt.argv(), "--max_batch_size", "128"));
  CHECK(has_pair(trt.argv(), "--extra_llm_api_options", "opts.yaml"));
  CHECK(trt.extra_options_yaml.find("enable_attention_dp: true") != std::string::npos);
  CHECK(trt.extra_options_yaml.find("max_draft_len: 3") != std::string::npos);
}

TEST_CASE("validity rules are checked before anything launches") {
  auto s = settings();
  s.max_num_batched_tokens = 64; // below max_num_seqs
  CHECK_THROWS_WITH_AS(command_line(EngineKind::vllm, s),
                       doctest::Contains("max_num_batched_tokens 64 is below max_num_seqs 128"), optkit::InputError);
  CHECK_THROWS_WITH_AS(command_line(EngineKind::optkit, settings()), doctest::Contains("no model parallelism"),
                       optkit::InputError);
  auto bad = settings();
  bad.memory_fraction = 1.5;
  CHECK_THROWS_WITH_AS(command_line(EngineKind::sglang, bad), doctest::Contains("memory fraction 1.5"),
                       optkit::InputError);
  CHECK_THROWS_AS(parse_engine("tgi"), optkit::InputError);
  EngineSettings mine;
  mine.model = "testdata/models/tiny-base";
  mine.max_num_seqs = 8;
  const auto optkit = command_line(EngineKind::optkit, mine).argv();
  CHECK(optkit[1] == "serve-deltas");
  CHECK(has_pair(optkit, "--base", "testdata/models/tiny-base"));
  CHECK(has_pair(optkit, "--max-num-seqs", "8"));
}

TEST_CASE("a rendered command line is one shell command with quoted JSON") {
  const auto text = command_line(EngineKind::vllm, settings()).render();
  CHECK(text.rfind("vllm serve Qwen/Qwen3-235B-A22B --port 8123", 0) == 0);
  CHECK(text.find(R"('{"method":"eagle","num_speculative_tokens":3}')") != std::string::npos);
  CHECK(text.find(" \\\n    --tensor-parallel-size 4") != std::string::npos);
}

TEST_CASE("enable_prefix_caching: each engine's own switch, its default left alone when unset") {
  for (const bool on : {true, false}) {
    CAPTURE(on);
    auto s = settings();
    apply_knob(EngineKind::vllm, s, "enable_prefix_caching", on ? 1.0 : 0.0);
    const auto vllm = command_line(EngineKind::vllm, s).argv();
    CHECK(std::count(vllm.begin(), vllm.end(), on ? "--enable-prefix-caching" : "--no-enable-prefix-caching") == 1);
    const auto sglang = command_line(EngineKind::sglang, s).argv(); // the radix cache is on by default
    CHECK(std::count(sglang.begin(), sglang.end(), "--disable-radix-cache") == (on ? 0 : 1));
    const auto trt = command_line(EngineKind::trtllm, s, "opts.yaml");
    CHECK(trt.extra_options_yaml.find(on ? "  enable_block_reuse: true\n" : "  enable_block_reuse: false\n") !=
          std::string::npos);
    EngineSettings mine;
    mine.model = "testdata/models/tiny-base";
    apply_knob(EngineKind::optkit, mine, "enable_prefix_caching", on ? 1.0 : 0.0);
    const auto optkit = command_line(EngineKind::optkit, mine).argv();
    CHECK(std::count(optkit.begin(), optkit.end(), on ? "--enable-prefix-caching" : "--no-enable-prefix-caching") == 1);
  }
  const auto unset = command_line(EngineKind::vllm, settings()).argv();
  CHECK(std::none_of(unset.begin(), unset.end(), [](const auto& a) { return a.find("prefix-caching") != a.npos; }));
  CHECK(command_line(EngineKind::trtllm, settings(), "o.yaml").extra_options_yaml.find("enable_block_reuse") ==
        std::string::npos);
  auto s = settings();
  CHECK_THROWS_WITH_AS(apply_knob(EngineKind::vllm, s, "enable_prefix_caching", 0.5),
                       doctest::Contains("enable_prefix_caching is 0 or 1, got 0.5"), optkit::InputError);
}

TEST_CASE("llama-server: slots, the whole context, batch, threads, flash attention, KV type and --metrics") {
  EngineSettings s;
  s.model = "/models/llama-3.1-8b.Q4_K_M.gguf";
  s.port = 8081;
  s.max_num_seqs = 8;
  s.max_model_len = 4096;
  s.max_num_batched_tokens = 256;
  s.threads = 16;
  s.flash_attention = true;
  s.kv_cache_dtype = "q8_0";
  s.speculative_tokens = 4;
  const auto argv = command_line(EngineKind::llamacpp, s).argv();
  CHECK(argv[0] == "llama-server");
  CHECK(has_pair(argv, "-m", "/models/llama-3.1-8b.Q4_K_M.gguf"));
  CHECK(has_pair(argv, "--port", "8081"));
  CHECK(has_pair(argv, "-np", "8"));
  CHECK(has_pair(argv, "-c", "32768")); // llama-server divides -c among its slots
  CHECK(has_pair(argv, "-b", "256"));
  CHECK(has_pair(argv, "-ub", "256")); // the physical batch no larger than the logical one
  CHECK(has_pair(argv, "-t", "16"));
  CHECK(has_pair(argv, "-tb", "16"));
  CHECK(has_pair(argv, "-fa", "on"));
  CHECK(has_pair(argv, "-ctk", "q8_0"));
  CHECK(has_pair(argv, "-ctv", "q8_0"));
  CHECK(has_pair(argv, "--spec-type", "ngram-simple"));
  CHECK(has_pair(argv, "--spec-draft-n-max", "4"));
  CHECK(std::count(argv.begin(), argv.end(), "--metrics") == 1); // bench reads its queue there
  s.max_num_batched_tokens = 2048;
  CHECK(has_pair(command_line(EngineKind::llamacpp, s).argv(), "-ub", "512"));
  CHECK(parse_engine("llamacpp") == EngineKind::llamacpp);
  CHECK(to_string(EngineKind::llamacpp) == "llamacpp");
  // The knobs a tuner may turn, and what it may not.
  EngineSettings tuned;
  tuned.model = "m.gguf";
  apply_knob(EngineKind::llamacpp, tuned, "flash_attention", 0);
  apply_knob(EngineKind::llamacpp, tuned, "max_num_seqs", 4);
  const auto tuned_argv = command_line(EngineKind::llamacpp, tuned).argv();
  CHECK(has_pair(tuned_argv, "-fa", "off"));
  CHECK(has_pair(tuned_argv, "-np", "4"));
  CHECK_THROWS_WITH_AS(apply_knob(EngineKind::llamacpp, tuned, "memory_fraction", 0.5),
                       doctest::Contains("has no knob 'memory_fraction'"), optkit::InputError);
}

TEST_CASE("llama-server refuses by name what it has no flag for") {
  const auto refused = [](EngineSettings s, const char* why) {
    s.model = "m.gguf";
    CAPTURE(why);
    CHECK_THROWS_WITH_AS(command_line(EngineKind::llamacpp, s), doctest::Contains(why), optkit::InputError);
  };
  EngineSettings s;
  s.tensor_parallel = 2;
  s.pipeline_parallel = 2;
  refused(s, "one way at a time");
  s = {};
  s.expert_parallel = 2;
  refused(s, "no attention data parallelism or expert parallelism");
  s = {};
  s.kv_cache_dtype = "fp8";
  refused(s, "KV cache type 'fp8' is not one of");
  s = {};
  s.prefix_caching = false;
  refused(s, "no flag to turn that off");
  s = {};
  s.memory_fraction = 0.9;
  refused(s, "no GPU memory fraction");
  s = {};
  s.quantization = "fp8";
  refused(s, "quantize the file instead");
  // flash_attention and threads belong to the CPU engines' adapters.
  auto gpu = settings();
  gpu.flash_attention = true;
  CHECK_THROWS_WITH_AS(command_line(EngineKind::vllm, gpu), doctest::Contains("flash_attention is llama-server's"),
                       optkit::InputError);
  gpu = settings();
  gpu.threads = 8;
  CHECK_THROWS_WITH_AS(command_line(EngineKind::sglang, gpu), doctest::Contains("threads are set for CPU engines"),
                       optkit::InputError);
}

TEST_CASE("llama-server on GPUs: every layer offloaded, a model over several split evenly by rows or layers") {
  EngineSettings s;
  s.model = "m.gguf";
  s.all_layers_on_gpus = true;
  auto argv = command_line(EngineKind::llamacpp, s).argv();
  CHECK(has_pair(argv, "-ngl", "999"));
  CHECK(std::count(argv.begin(), argv.end(), "-sm") == 0); // one GPU: nothing to split
  s.tensor_parallel = 2;
  argv = command_line(EngineKind::llamacpp, s).argv();
  CHECK(has_pair(argv, "-sm", "row"));
  CHECK(has_pair(argv, "-ts", "1,1"));
  s.tensor_parallel = 1;
  s.pipeline_parallel = 4;
  argv = command_line(EngineKind::llamacpp, s).argv();
  CHECK(has_pair(argv, "-sm", "layer"));
  CHECK(has_pair(argv, "-ts", "1,1,1,1"));
  CHECK(has_pair(argv, "-ngl", "999"));
  // On the CPU (bench and tune launch it so by default) no GPU flag at all.
  EngineSettings cpu;
  cpu.model = "m.gguf";
  argv = command_line(EngineKind::llamacpp, cpu).argv();
  CHECK(std::count(argv.begin(), argv.end(), "-ngl") == 0);
}
