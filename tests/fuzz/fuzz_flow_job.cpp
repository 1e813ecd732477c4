// libFuzzer target: arbitrary bytes as a flow job file, and as an output folder's job.json.
// Properties: a job or an InputError, never a crash; a parsed job has at least one recipe, one
// trial and one slot, and survives the JSON round trip that resume relies on unchanged.
#include "core/error.hpp"
#include "flow/flow_job.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto job = optkit::flow::parse_flow_job(text, "/fuzz/job.yaml");
    if (job.compress.recipes.empty() || job.compress.trials < 1 || job.slots < 1)
      std::abort();
    const auto back = optkit::flow::flow_job_from_json(optkit::flow::to_json(job));
    if (optkit::flow::to_json(back) != optkit::flow::to_json(job))
      std::abort();
  } catch (const optkit::InputError&) {
  }
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_discarded()) {
    try {
      optkit::flow::flow_job_from_json(j);
    } catch (const optkit::InputError&) {
    }
  }
  return 0;
}
