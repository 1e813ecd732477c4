// Reading llama-imatrix's files: its legacy binary imatrix.dat (the format most published
// importance matrices are in) and its GGUF format, each weight's mean as llama-quantize computes
// it; clear errors for truncated files, impossible values and other files; a mixture of experts'
// matrix collected per expert and written stacked.
#include "compress/calibration.hpp"
#include "compress/importance_matrix.hpp"
#include "core/error.hpp"
#include "model/gguf_file.hpp"
#include "model/model_config.hpp"
#include "runtime/activation_precision.hpp"
#include "support/scratch_dir.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace optkit;

namespace {

struct LegacyEntry {
  std::string name;
  std::int32_t ncall;
  std::vector<float> values;
};

template <typename T>
void
append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Laid out as llama-imatrix's save_imatrix_legacy writes it.
std::string
legacy_file(const std::vector<LegacyEntry>& entries, std::int32_t chunks, const std::string& dataset) {
  std::string out;
  append(out, static_cast<std::int32_t>(entries.size()));
  for (const auto& e : entries) {
    append(out, static_cast<std::int32_t>(e.name.size()));
    out += e.name;
    append(out, e.ncall);
    append(out, static_cast<std::int32_t>(e.values.size()));
    for (const float v : e.values)
      append(out, v);
  }
  append(out, chunks);
  append(out, static_cast<std::int32_t>(dataset.size()));
  return out + dataset;
}

} // namespace

TEST_CASE("a legacy imatrix.dat reads as llama-quantize reads it: value / ncall per column") {
  test::ScratchDir dir;
  const std::vector<LegacyEntry> entries{{"blk.0.attn_q.weight", 3, {3.0f, 0.3f, 7.0f}},
                                         {"blk.1.ffn_down.weight", 0, {2.0f, 5.0f}},
                                         {"blk.0.ffn_gate_exps.weight", 3, {1.0f}}};
  const auto bytes = legacy_file(entries, 3, "calibration.txt");
  test::write_text(dir / "m.dat", bytes);
  const auto m = compress::read_importance_matrix(dir / "m.dat");
  REQUIRE(m.weights.size() == 2); // an expert's weight, which GGUF export does not write: skipped
  const auto& q = m.weights.at("model.layers.0.self_attn.q_proj");
  CHECK(q.mean == std::vector<float>{3.0f / 3.0f, 0.3f / 3.0f, 7.0f / 3.0f});
  // ncall 0: the values themselves, as llama-quantize takes them.
  CHECK(m.weights.at("model.layers.1.mlp.down_proj").mean == std::vector<float>{2.0f, 5.0f});
  CHECK(m.samples == 3);
  CHECK(m.dataset == "calibration.txt");
  CHECK(m.source == (dir / "m.dat").string());

  // Without the optional trailer, the chunks are the largest ncall.
  const auto no_trailer = bytes.substr(0, bytes.size() - 4 - 4 - std::string("calibration.txt").size());
  test::write_text(dir / "bare.dat", no_trailer);
  CHECK(compress::read_importance_matrix(dir / "bare.dat").samples == 3);
  CHECK(compress::read_importance_matrix(dir / "bare.dat").dataset.empty());

  // Every cut inside an entry is refused with one line, never read past the end.
  for (const std::size_t cut : {std::size_t{2}, std::size_t{6}, std::size_t{20}, std::size_t{40}}) {
    test::write_text(dir / "cut.dat", no_trailer.substr(0, cut));
    CHECK_THROWS_WITH_AS(compress::read_importance_matrix(dir / "cut.dat"),
                         doctest::Contains("not a llama-imatrix file (GGUF or legacy imatrix.dat): it ends at"),
                         InputError);
  }
}

TEST_CASE("importance matrices with impossible values or no decoder weight are refused") {
  test::ScratchDir dir;
  test::write_text(dir / "nan.dat",
                   legacy_file({{"blk.0.attn_k.weight", 1, {1.0f, std::numeric_limits<float>::quiet_NaN()}}}, 1, ""));
  CHECK_THROWS_WITH_AS(compress::read_importance_matrix(dir / "nan.dat"),
                       doctest::Contains("blk.0.attn_k.weight has the value nan"), InputError);
  test::write_text(dir / "negative.dat", legacy_file({{"blk.0.attn_k.weight", 1, {-1.0f}}}, 1, ""));
  CHECK_THROWS_WITH_AS(compress::read_importance_matrix(dir / "negative.dat"), doctest::Contains("has the value -1"),
                       InputError);
  test::write_text(dir / "output.dat", legacy_file({{"blk.0.ffn_up_exps.weight", 1, {1.0f}}}, 1, ""));
  CHECK_THROWS_WITH_AS(compress::read_importance_matrix(dir / "output.dat"),
                       doctest::Contains("no entry names a decoder layer's weight"), InputError);
  test::write_text(dir / "text.dat", "not an importance matrix at all");
  CHECK_THROWS_WITH_AS(compress::read_importance_matrix(dir / "text.dat"),
                       doctest::Contains("text.dat: not a llama-imatrix file"), InputError);
  test::write_text(dir / "empty.dat", "");
  CHECK_THROWS_WITH_AS(compress::read_importance_matrix(dir / "empty.dat"),
                       doctest::Contains("empty.dat: not a llama-imatrix file"), InputError);
  test::write_text(
      dir / "huge.dat",
      legacy_file({{"blk.0.attn_k.weight", 1, {1.0f}}}, 1, "").replace(4, 4, std::string("\xff\xff\xff\x7f", 4)));
  CHECK_THROWS_WITH_AS(compress::read_importance_matrix(dir / "huge.dat"), doctest::Contains("inside an entry's name"),
                       InputError);
}

TEST_CASE("the GGUF importance matrix optkit writes reads back to the same means; llama-imatrix's GGUF too") {
  test::ScratchDir dir;
  compress::ImportanceMatrix written;
  written.weights["model.layers.0.mlp.up_proj"] = compress::weight_importance({4.0f, 0.5f, 9.0f}, 2.0f);
  written.samples = 2;
  written.sample_tokens = 1;
  written.dataset = "text";
  compress::write_importance_matrix(written, dir / "m.gguf");
  const auto read = compress::read_importance_matrix(dir / "m.gguf");
  CHECK(read.weights.at("model.layers.0.mlp.up_proj").mean == std::vector<float>{2.0f, 0.25f, 4.5f});
  CHECK(read.dataset == "text");
  CHECK(read.samples == 2);
  // The committed matrix of tiny-base (conformance.gguf_llama_cpp quantizes with it).
  const auto tiny = compress::read_importance_matrix(test::testdata_dir() / "golden" / "tiny-base.imatrix.gguf");
  CHECK(tiny.weights.size() == 28);
  CHECK(tiny.samples == 32);
}

TEST_CASE("a mixture of experts' matrix counts each expert's own rows, and is written stacked as llama-imatrix "
          "writes it") {
  // The Mixtral oracle (6 experts, top 2) over two windows of 24 tokens: every row reaches the
  // attention's inputs and 2 experts' gate/up inputs and down inputs.
  const auto folder = test::testdata_dir() / "models" / "oracle" / "mixtral-moe";
  compress::CalibrationSet calibration;
  for (std::int32_t s = 0; s < 2; ++s) {
    calibration.samples.emplace_back();
    for (std::int32_t t = 0; t < 24; ++t)
      calibration.samples.back().push_back((7 * t + 31 * s) % 250 + 1);
  }
  const auto matrix = compress::collect_importance_matrix(folder, calibration, 1, runtime::ActivationPrecision::fp32);
  CHECK(matrix.weights.at("model.layers.1.self_attn.q_proj").count == 48);
  CHECK_FALSE(matrix.weights.contains("model.layers.1.mlp.gate_proj"));
  for (const char* projection : {"w1", "w3", "w2"}) {
    float routed = 0;
    for (int e = 0; e < 6; ++e) {
      const auto& w = matrix.weights.at(fmt::format("model.layers.1.block_sparse_moe.experts.{}.{}", e, projection));
      CHECK(w.in_sum2.size() == (projection == std::string("w2") ? 48u : 64u));
      routed += w.count;
    }
    CHECK(routed == 2 * 48);
  }
  test::ScratchDir dir;
  compress::write_importance_matrix(matrix, dir / "m.gguf");
  const model::GgufFile file(dir / "m.gguf");
  const auto* sums = file.find_tensor("blk.1.ffn_down_exps.weight.in_sum2");
  const auto* counts = file.find_tensor("blk.1.ffn_down_exps.weight.counts");
  REQUIRE(sums != nullptr);
  REQUIRE(counts != nullptr);
  CHECK(sums->dims == std::vector<std::int64_t>{48, 6});
  CHECK(counts->dims == std::vector<std::int64_t>{1, 6});
  std::vector<float> expert_counts(6);
  std::memcpy(expert_counts.data(), file.tensor_bytes(*counts).data(), 6 * sizeof(float));
  for (int e = 0; e < 6; ++e)
    CHECK(expert_counts[static_cast<std::size_t>(e)] ==
          matrix.weights.at(fmt::format("model.layers.1.block_sparse_moe.experts.{}.w2", e)).count);
  std::vector<float> expert_3(48);
  std::memcpy(expert_3.data(), file.tensor_bytes(*sums).data() + 3 * 48 * sizeof(float), 48 * sizeof(float));
  CHECK(expert_3 == matrix.weights.at("model.layers.1.block_sparse_moe.experts.3.w2").in_sum2);
  CHECK(file.find_tensor("blk.1.attn_q.weight.in_sum2") != nullptr);
  // Read back with the model's config, each expert's statistic returns under its own name; without
  // one, the stacked entries are skipped.
  const auto config = model::load_model_config(folder);
  const auto read = compress::read_importance_matrix(dir / "m.gguf", &config);
  CHECK(read.weights.size() == matrix.weights.size());
  for (const auto& entry : matrix.weights) {
    const std::string& module = entry.first; // a plain reference: CAPTURE's lambda cannot take a binding in clang 14
    CAPTURE(module);
    REQUIRE(read.weights.contains(module));
    CHECK(read.weights.at(module).in_sum2 == entry.second.in_sum2);
    CHECK(read.weights.at(module).count == entry.second.count);
  }
  CHECK_FALSE(compress::read_importance_matrix(dir / "m.gguf")
                  .weights.contains("model.layers.1.block_sparse_moe.experts.3.w2"));
}
