// Bundled recipes load and say what the issue asks of them; bad recipes are exit-2 errors that
// name the file; calibration samplers are seeded, distinct across seeds and honour their strategy.
#include "compress/calibration.hpp"
#include "compress/recipe.hpp"
#include "compress/recipe_fit.hpp"
#include "core/error.hpp"
#include "model/calibration_documents.hpp"
#include "model/random_model.hpp"
#include "model/tokenizer.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace optkit;
using compress::Sampler;

TEST_CASE("the bundled recipes") {
  const auto names = compress::bundled_recipe_names();
  for (const char* n :
       {"int_w8a8", "int_w4a16", "w4a16_rtn", "fp8_dynamic", "sparse24_int4", "delta_2of4_int4", "delta_2of4_int2"})
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
  const auto w8a8 = compress::load_recipe("int_w8a8");
  CHECK(w8a8.smoothquant_alpha.has_value());
  CHECK(w8a8.input_activations->strategy == quant::Strategy::token);
  CHECK(w8a8.method == compress::Method::gptq);
  const auto w4 = compress::load_recipe("int_w4a16");
  CHECK(w4.weights.bits == 4);
  CHECK(w4.weights.group_size == 128);
  CHECK(!w4.input_activations);
  CHECK(compress::load_recipe("fp8_dynamic").weights.is_fp8());
  CHECK(!compress::load_recipe("fp8_dynamic").needs_calibration());
  CHECK(compress::load_recipe("sparse24_int4").sparse_2_4);
  const auto d2 = compress::load_recipe("delta_2of4_int2");
  CHECK(d2.delta);
  CHECK(d2.weights.bits == 2);
  CHECK(d2.lossless == compress::Lossless::zstd);
  CHECK(d2.weights.levels == quant::Levels::midrise);
  CHECK(w4.weights.levels == quant::Levels::midtread);
}

TEST_CASE("the bundled float recipes: FP8 block, NVFP4 (W4A4 and weight-only) and MXFP4") {
  const auto block = compress::load_recipe("fp8_block");
  CHECK(block.weights.strategy == quant::Strategy::block);
  CHECK(block.weights.block_rows == 128);
  CHECK(block.weights.block_cols == 128);
  CHECK(block.input_activations->strategy == quant::Strategy::group);
  CHECK(block.input_activations->group_size == 128);
  CHECK(!block.needs_calibration());
  const auto nvfp4 = compress::load_recipe("nvfp4");
  CHECK(nvfp4.weights.has_global_scale());
  CHECK(nvfp4.input_activations->dynamic_local);
  CHECK(nvfp4.needs_calibration()); // the activations' global scale
  CHECK(!compress::load_recipe("nvfp4a16").needs_calibration());
  CHECK(compress::load_recipe("mxfp4").weights.has_power_of_two_scales());
}

TEST_CASE("recipes are checked against the model's shapes before anything is compressed") {
  test::ScratchDir dir;
  auto config = model::preset_model_config("llama-3.2-1b");
  config["hidden_size"] = 72; // not a whole number of FP4 groups, nor of FP8 blocks
  config["intermediate_size"] = 96;
  config["num_attention_heads"] = 4;
  config["num_key_value_heads"] = 2;
  config["head_dim"] = 18;
  config["num_hidden_layers"] = 1;
  config["vocab_size"] = 64;
  model::write_random_model(dir.path(), config, model::DType::bf16, 3);
  try {
    compress::check_recipe_fits(compress::load_recipe("nvfp4a16"), dir.path());
    FAIL("a 72-column linear fits NVFP4's groups of 16");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("model.layers.0.self_attn.q_proj: 72 input features are not a whole number of "
                                     "NVFP4's groups of 16") != std::string::npos);
  }
  CHECK_THROWS_AS(compress::check_recipe_fits(compress::load_recipe("mxfp4"), dir.path()), InputError);
  const auto block = compress::check_recipe_fits(compress::load_recipe("fp8_block"), dir.path());
  REQUIRE(block.size() == 1);
  CHECK(block[0].find("vLLM will refuse this output") != std::string::npos);
  const auto sparse = compress::check_recipe_fits(compress::load_recipe("sparse24_int4"), dir.path());
  REQUIRE(sparse.size() == 1);
  CHECK(sparse[0].find("vLLM no longer loads 2:4-sparse checkpoints") != std::string::npos);
  CHECK(compress::check_recipe_fits(compress::load_recipe("w4a16_rtn"), dir.path()).empty());
}

TEST_CASE("recipe errors name the file and the fix") {
  test::ScratchDir dir;
  auto write = [&](const std::string& text) {
    test::write_text(dir / "r.yaml", text);
    return dir / "r.yaml";
  };
  CHECK_THROWS_WITH_AS(compress::load_recipe("int_w4a61"), doctest::Contains("did you mean 'int_w4a16'"), InputError);
  // A name longer than a file name may be is not found, not a filesystem exception.
  CHECK_THROWS_AS(compress::load_recipe(std::string(300, 'r')), InputError);
  CHECK_THROWS_AS(compress::load_recipe(std::string(300, 'r') + ".yaml"), InputError);
  const auto base = std::string("name: x\ndescription: y\nscheme:\n  weights: {num_bits: 4, strategy: group, "
                                "group_size: 128}\n");
  CHECK_THROWS_WITH_AS(compress::load_recipe_file(write(base + "algorithm: {metod: gptq}\n")),
                       doctest::Contains("did you mean 'algorithm.method'"), InputError);
  CHECK_THROWS_WITH_AS(compress::load_recipe_file(write(base + "smoothquant: {alpha: 0.5}\n")),
                       doctest::Contains("smoothquant only helps when activations are quantized"), InputError);
  CHECK_THROWS_WITH_AS(compress::load_recipe_file(
                           write("name: x\ndescription: y\nscheme:\n  weights: {num_bits: 4, strategy: group}\n")),
                       doctest::Contains("group needs group_size > 0"), InputError);
  CHECK_THROWS_WITH_AS(compress::load_recipe_file(write(base + "lossless: zstd\n")),
                       doctest::Contains("lossless applies to delta recipes only"), InputError);
  CHECK_THROWS_WITH_AS(compress::load_recipe_file(write(base + "mode: delta\nalgorithm: {method: gptq}\n")),
                       doctest::Contains("set algorithm.sparsity: \"2:4\""), InputError);
  const auto midrise = std::string("name: x\ndescription: y\nscheme:\n  weights: {num_bits: 2, strategy: group, "
                                   "group_size: 64, levels: midrise}\n");
  CHECK_THROWS_WITH_AS(compress::load_recipe_file(write(midrise)),
                       doctest::Contains("midrise is for delta recipes only"), InputError);
  const auto asymmetric = std::string("name: x\ndescription: y\nmode: delta\nalgorithm: {sparsity: \"2:4\"}\n"
                                      "scheme:\n  weights: {num_bits: 2, strategy: group, group_size: 64, "
                                      "symmetric: false, levels: midrise}\n");
  CHECK_THROWS_WITH_AS(compress::load_recipe_file(write(asymmetric)),
                       doctest::Contains("levels midrise needs symmetric integer weights"), InputError);
}

TEST_CASE("calibration samplers: seeded, without replacement, distinct subsets per seed") {
  std::vector<std::vector<std::int32_t>> docs;
  for (int i = 0; i < 40; ++i)
    docs.push_back(std::vector<std::int32_t>(static_cast<std::size_t>(8 + i * 3), i % 7));
  for (const auto sampler : {Sampler::uniform, Sampler::length, Sampler::stratified}) {
    CAPTURE(compress::sampler_name(sampler));
    const auto a = compress::sample_calibration(docs, 10, sampler, 1);
    const auto again = compress::sample_calibration(docs, 10, sampler, 1);
    const auto b = compress::sample_calibration(docs, 10, sampler, 2);
    CHECK(a.document_ids == again.document_ids);
    CHECK(a.document_ids != b.document_ids);
    CHECK(std::set<std::int64_t>(a.document_ids.begin(), a.document_ids.end()).size() == 10);
    CHECK(a.samples.size() == 10);
  }
  // Length-weighted draws favour long documents.
  double uniform_tokens = 0, length_tokens = 0;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    uniform_tokens += static_cast<double>(compress::sample_calibration(docs, 5, Sampler::uniform, seed).tokens);
    length_tokens += static_cast<double>(compress::sample_calibration(docs, 5, Sampler::length, seed).tokens);
  }
  CHECK(length_tokens > 1.15 * uniform_tokens);
  // Asking for more samples than documents takes them all.
  CHECK(compress::sample_calibration(docs, 100, Sampler::uniform, 0).samples.size() == 40);
}

TEST_CASE("calibration files: paragraphs of text, JSONL rows, and clear errors") {
  test::ScratchDir dir;
  const auto model = test::testdata_dir() / "models" / "tiny-base";
  test::write_text(dir / "c.txt", "First paragraph with enough words to be a document.\n\nSecond paragraph, also "
                                  "long enough to count as one.\n\nshort\n");
  CHECK(model::read_calibration_documents(dir / "c.txt", model, 512).size() == 2);
  test::write_text(dir / "c.jsonl", "{\"text\": \"a row of plain text that is long enough\"}\n"
                                    "{\"messages\": [{\"role\": \"user\", \"content\": \"hello there\"}, "
                                    "{\"role\": \"assistant\", \"content\": \"hi, how can I help?\"}]}\n");
  const auto docs = model::read_calibration_documents(dir / "c.jsonl", model, 512);
  CHECK(docs.size() == 2);
  CHECK(model::read_calibration_documents(dir / "c.txt", model, 8).front().size() == 8);
  test::write_text(dir / "bad.jsonl", "{\"text\": \"fine and long enough to keep\"}\n{\"txt\": 1}\n");
  CHECK_THROWS_WITH_AS(model::read_calibration_documents(dir / "bad.jsonl", model, 512),
                       doctest::Contains("bad.jsonl:2: a calibration row needs a string 'text'"), InputError);
  test::write_text(dir / "empty.txt", "");
  CHECK_THROWS_WITH_AS(model::read_calibration_documents(dir / "empty.txt", model, 512),
                       doctest::Contains("no document of at least 8 tokens"), InputError);
  CHECK_THROWS_WITH_AS(model::read_calibration_documents(dir / "missing.txt", model, 512),
                       doctest::Contains("no such file"), InputError);
}

TEST_CASE("a text file as one token stream, cut into chunks as llama-imatrix cuts its file") {
  test::ScratchDir dir;
  const auto model = test::testdata_dir() / "models" / "tiny-base";
  const std::string text = "First paragraph with enough words to be a document.\n\nSecond paragraph, also long "
                           "enough to count as one.\n\nshort";
  test::write_text(dir / "a.txt", text + "\n");
  test::write_text(dir / "b.txt", text);
  const auto stream = model::read_calibration_stream(dir / "a.txt", model);
  // One final newline is dropped, as llama.cpp's -f drops it; the paragraphs' breaks stay.
  CHECK(stream == model::read_calibration_stream(dir / "b.txt", model));
  CHECK(stream == model::Tokenizer::load_folder(model).encode(text, true));
  test::write_text(dir / "short.txt", "two words\n");
  CHECK_THROWS_WITH_AS(model::read_calibration_stream(dir / "short.txt", model),
                       doctest::Contains("short.txt: 5 tokens; calibration needs at least 8"), InputError);

  // Whole windows only, each led by BOS in place of its first token; the partial tail is dropped.
  std::vector<std::int32_t> tokens{1};
  for (std::int32_t t = 100; t < 123; ++t)
    tokens.push_back(t); // 24 tokens, BOS first
  const auto windows = compress::stream_windows(tokens, 10, 1);
  REQUIRE(windows.size() == 2);
  CHECK(windows[0] == std::vector<std::int32_t>{1, 100, 101, 102, 103, 104, 105, 106, 107, 108});
  CHECK(windows[1] == std::vector<std::int32_t>{1, 110, 111, 112, 113, 114, 115, 116, 117, 118});
  // A stream without the BOS keeps its tokens; one shorter than a window is that window.
  CHECK(compress::stream_windows(std::vector<std::int32_t>(tokens.begin() + 1, tokens.end()), 10, 1)[1].front() == 110);
  CHECK(compress::stream_windows(tokens, 64, 1) == std::vector<std::vector<std::int32_t>>{tokens});
  CHECK(compress::stream_windows(std::vector<std::int32_t>(tokens.begin(), tokens.begin() + 7), 64, 1).empty());
}
