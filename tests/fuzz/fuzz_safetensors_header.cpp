// libFuzzer target: arbitrary bytes as a safetensors file. Anything parse_safetensors accepts must
// describe spans that lie inside the buffer (ASan checks every element read below).
#include "core/error.hpp"
#include "model/safetensors.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto header = optkit::model::parse_safetensors(bytes, "fuzz.safetensors");
    for (const auto& t : header.tensors) {
      if (t.end - t.begin != t.element_count() * optkit::model::dtype_size(t.dtype))
        std::abort();
      const std::byte* begin = data ? bytes.data() + header.data_offset + t.begin : nullptr;
      for (std::uint64_t i = 0; i < t.element_count() && i < 4; ++i)
        (void)optkit::model::element_as_float(t.dtype, begin, static_cast<std::size_t>(i));
    }
  } catch (const optkit::InputError&) {
  }
  return 0;
}
