// libFuzzer target: the tensors of a compressed delta (optkit compress delta), plain or as a zstd
// frame, must load and decode every delta it holds or throw InputError, never crash, for any bytes.
#include "core/error.hpp"
#include "quant/delta_format.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2)
    return 0;
  const int bits = data[0] % 3 == 0 ? 2 : data[0] % 3 == 1 ? 4 : 8;
  const bool zstd = (data[0] & 0x80) != 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    std::vector<std::byte> tensors;
    if (zstd) {
      tensors = optkit::quant::zstd_decompress(rest, "fuzz/delta.safetensors.zst", 1 << 20);
    } else {
      const auto* begin = reinterpret_cast<const std::byte*>(rest.data());
      tensors.assign(begin, begin + rest.size());
    }
    const nlohmann::json config = {{"format", "optkit-delta"},
                                   {"version", 1},
                                   {"bits", bits},
                                   {"levels", (data[0] & 0x40) != 0 ? "midrise" : "midtread"},
                                   {"base", nlohmann::json::object()}};
    const optkit::quant::DeltaArtifact artifact(config, std::move(tensors), "fuzz/delta.safetensors");
    for (const auto& suffix : {std::string(".delta_values"), std::string(".delta_packed")}) {
      for (int probe = 0; probe < 2; ++probe) {
        const std::string module = probe == 0 ? "model.layers.0.mlp.up_proj" : "lm_head";
        const auto view = artifact.find(module + suffix);
        if (!view.info || view.shape().size() != 2)
          continue;
        const auto rows = view.shape()[0];
        const auto cols = suffix == ".delta_packed" ? view.shape()[1] * (32 / bits) : view.shape()[1] * 2 * (32 / bits);
        if (rows > 0 && cols > 0 && rows * cols <= (1 << 22))
          (void)artifact.decode_delta(module, rows, cols);
      }
    }
  } catch (const optkit::InputError&) {
  }
  return 0;
}
