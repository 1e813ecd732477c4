// libFuzzer target: the bytes bench reads from outside. The first byte picks what the rest is:
//   even → a server's streamed OpenAI response (untrusted network bytes), fed whole and split at
//          a point the input chooses: the reader never crashes, and both feedings agree on
//          [DONE], the error, the text chunks and the usage;
//   odd  → an --slo expression (mode 1), a serving profile YAML (mode 3), or a request trace
//          (its format found by its content, mode 5: JSON lines, Mooncake's or an Azure CSV;
//          read as an Azure CSV, mode 7): a value or an InputError, nothing else.
#include "bench/openai_stream.hpp"
#include "bench/request_trace.hpp"
#include "bench/serving_profile.hpp"
#include "bench/slo.hpp"
#include "core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

struct Seen {
  bool done = false;
  std::string error;
  std::int64_t chunks = 0, prompt = 0, completion = 0;
  bool usage = false;
  bool operator==(const Seen&) const = default;
};

Seen
read_stream(std::string_view text, std::size_t split) {
  optkit::bench::OpenAiStreamReader reader;
  split = split > text.size() ? text.size() : split;
  if (reader.feed(text.substr(0, split), 1.0))
    reader.feed(text.substr(split), 2.0);
  return {reader.done(),     reader.error(), reader.text_chunks(), reader.prompt_tokens(), reader.completion_tokens(),
          reader.has_usage()};
}

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2)
    return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  if (data[0] % 2 == 0) {
    const auto whole = read_stream(text, text.size());
    const auto split = read_stream(text, data[1] % (text.size() + 1));
    if (!(whole == split))
      __builtin_trap();
    return 0;
  }
  try {
    if (data[0] % 8 == 1)
      (void)optkit::bench::parse_slo(std::string(text));
    else if (data[0] % 8 == 3)
      (void)optkit::bench::parse_serving_profile(std::string(text), "fuzz.yaml");
    else if (data[0] % 8 == 5)
      (void)optkit::bench::parse_request_trace(std::string(text), "fuzz.jsonl");
    else // the Azure CSV reader, whatever the bytes look like
      (void)optkit::bench::parse_request_trace(std::string(text), "fuzz.csv", optkit::bench::TraceFormat::azure);
  } catch (const optkit::InputError&) {
  }
  return 0;
}
