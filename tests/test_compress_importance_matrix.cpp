// Reading llama-imatrix's files: its legacy binary imatrix.dat (the format most published
// importance matrices are in) and its GGUF format, each weight's mean as llama-quantize computes
// it; clear errors for truncated files, impossible values and other files.
#include "compress/importance_matrix.hpp"
#include "core/error.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

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
