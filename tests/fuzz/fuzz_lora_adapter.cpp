// libFuzzer target: a PEFT LoRA adapter's adapter_model.safetensors bytes (and a config picked by
// the first byte) against a small Llama-shaped base: the factors load, with shapes checked, or
// InputError is thrown — never a crash, an out-of-bounds read or another exception.
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "runtime/lora_adapter.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1)
    return 0;
  optkit::model::ModelConfig base;
  base.vocab_size = 64;
  base.hidden_size = 16;
  base.intermediate_size = 32;
  base.num_layers = 2;
  base.num_heads = 4;
  base.num_kv_heads = 2;
  base.head_dim = 4;
  const nlohmann::json config = {{"peft_type", "LORA"},
                                 {"r", 1 + data[0] % 8},
                                 {"lora_alpha", 16},
                                 {"use_rslora", (data[0] & 0x80) != 0},
                                 {"bias", "none"}};
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1),
                                     reinterpret_cast<const std::byte*>(data + size));
  try {
    const auto factors = optkit::runtime::parse_lora_adapter(config, bytes, "fuzz", base);
    optkit::ThreadPool pool(1);
    for (const auto& [module, f] : factors) {
      std::vector<float> x(32, 0.5f), y(static_cast<std::size_t>(f->rows()), 0.0f);
      f->multiply_add(x.data(), 1, y.data(), f->rows(), pool); // shapes were checked: no overrun
    }
  } catch (const optkit::InputError&) {
  }
  return 0;
}
