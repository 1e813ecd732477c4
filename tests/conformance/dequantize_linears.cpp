// Test helper: what optkit's runtime makes of a model folder's decoder linears, for an
// independent reader to check (tests/conformance/compressed_tensors_reader.py). For every linear
// of every decoder layer it writes, to one F32 safetensors file:
//   <module>.weight  the weight as the runtime dequantizes it, [out, in]
//   <module>.x       a fixed input, [4, in] (seeded normal values)
//   <module>.y       the runtime's product x · Wᵀ, activation quantization included, [4, out]
//   dequantize_linears MODEL_DIR OUT.safetensors
#include "core/thread_pool.hpp"
#include "model/safetensors_writer.hpp"
#include "runtime/decoder_pass.hpp"
#include "runtime/decoder_weights.hpp"

#include <fmt/format.h>
#include <iostream>
#include <random>

namespace {

constexpr std::int64_t kInputRows = 4;

std::vector<float>
seeded_input(std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (auto& v : x)
    v = normal(engine);
  return x;
}

} // namespace

int
main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: dequantize_linears MODEL_DIR OUT.safetensors\n";
    return 2;
  }
  using namespace optkit;
  const runtime::DecoderWeights weights(argv[1], std::nullopt);
  ThreadPool pool(2);
  model::TensorSet out;
  std::uint64_t seed = 1;
  for (std::int64_t layer = 0; layer < weights.config().num_layers; ++layer)
    for (const auto& linear : runtime::layer_linears(weights.config(), layer)) {
      const auto& w = weights.linear(layer, linear.name);
      const auto module = fmt::format("model.layers.{}.{}", layer, linear.name);
      const auto x = seeded_input(kInputRows * w.cols(), seed++);
      std::vector<float> y(static_cast<std::size_t>(kInputRows * w.rows()));
      w.multiply(x.data(), kInputRows, y.data(), pool);
      out.add_values(module + ".weight", model::DType::f32, {w.rows(), w.cols()}, runtime::dense_floats(w));
      out.add_values(module + ".x", model::DType::f32, {kInputRows, w.cols()}, x);
      out.add_values(module + ".y", model::DType::f32, {kInputRows, w.rows()}, y);
    }
  model::write_safetensors(argv[2], out.tensors());
  return 0;
}
