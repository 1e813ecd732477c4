// A mixture of experts through GGUF export and back: the Mixtral oracle written as Q8_0 holds each
// expert's projection at its own index of the stacked ffn_*_exps tensors, the router as F32, and
// the expert keys; the reader gives every expert's matrix back under its checkpoint name. A swapped
// or misaligned expert would come back as another expert's weights (an error of order 1).
#include "compress/gguf_export.hpp"
#include "core/error.hpp"
#include "model/gguf_file.hpp"
#include "model/gguf_model.hpp"
#include "model/layer_tensors.hpp"
#include "model/model_config.hpp"
#include "model/weight_store.hpp"
#include "quant/ggml_blocks.hpp"
#include "support/scratch_dir.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit;

namespace {

// max |a − b| / max |b| over a matrix's rows.
double
relative_max_error(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

std::vector<float>
dequantized(const model::GgufMatrix& m) {
  std::vector<float> out(static_cast<std::size_t>(m.rows * m.cols));
  const auto row_bytes = model::ggml_row_bytes(m.type, m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r)
    quant::dequantize_row(m.type, m.bytes.data() + r * row_bytes, m.cols, out.data() + r * m.cols);
  return out;
}

} // namespace

TEST_CASE("a Mixtral GGUF stacks each expert at its index and reads back under the checkpoint's names") {
  const auto folder = test::testdata_dir() / "models" / "oracle" / "mixtral-moe";
  test::ScratchDir scratch;
  const auto gguf = scratch / "mixtral-q8_0.gguf";
  compress::export_gguf({.model = folder, .output = gguf, .file_type = model::GgufFileType::q8_0, .threads = 1});

  const model::GgufFile file(gguf);
  CHECK(file.require_string("general.architecture") == "llama");
  CHECK(file.require_u32("llama.expert_count") == 6);
  CHECK(file.require_u32("llama.expert_used_count") == 2);
  const auto* stacked = file.find_tensor("blk.1.ffn_down_exps.weight");
  REQUIRE(stacked != nullptr);
  CHECK(stacked->dims == std::vector<std::int64_t>{48, 64, 6});
  REQUIRE(file.find_tensor("blk.0.ffn_gate_inp.weight") != nullptr);
  CHECK(file.find_tensor("blk.0.ffn_gate_inp.weight")->type == model::GgmlType::f32);
  CHECK(file.find_tensor("blk.0.ffn_gate.weight") == nullptr);

  const auto config = model::gguf_model_config(file);
  CHECK(config.architecture == model::Architecture::mixtral);
  CHECK(config.num_experts == 6);
  CHECK(config.experts_per_token == 2);
  CHECK(config.expert_intermediate_size == 48);

  const model::WeightStore source(folder), read_back(gguf);
  for (std::int64_t layer = 0; layer < config.num_layers; ++layer) {
    const auto router = model::router_module(config, layer) + ".weight";
    CHECK(read_back.require(router).to_floats() == source.require(router).to_floats());
    for (std::int64_t e = 0; e < config.num_experts; ++e)
      for (const auto p : {model::ExpertProjection::gate, model::ExpertProjection::up, model::ExpertProjection::down}) {
        const auto name = model::expert_module(config, layer, e, p) + ".weight";
        CAPTURE(name);
        const auto matrix = read_back.gguf_matrix(name);
        REQUIRE(matrix.has_value());
        const auto [rows, cols] = model::expert_shape(config, p);
        CHECK(matrix->rows == rows);
        CHECK(matrix->cols == cols);
        // Q8_0 (F16 where 48-value rows are not whole 32-value blocks): within 1 % of the largest weight.
        CHECK(relative_max_error(dequantized(*matrix), source.rows_as_floats(name, 0, rows)) < 0.01);
      }
  }
}

TEST_CASE("GGUF export refuses a Qwen3-MoE that llama.cpp's qwen3moe would run otherwise") {
  // The oracle keeps its top-k weights unnormalized and has a dense layer; llama.cpp's graph
  // renormalizes and routes in every layer.
  const auto folder = test::testdata_dir() / "models" / "oracle" / "qwen3-moe";
  test::ScratchDir scratch;
  CHECK_THROWS_WITH_AS(
      compress::export_gguf({.model = folder, .output = scratch / "q.gguf", .file_type = model::GgufFileType::q8_0}),
      doctest::Contains("Qwen3-MoE with norm_topk_prob and experts in every layer"), InputError);
  CHECK_FALSE(std::filesystem::exists(scratch / "q.gguf"));
}
