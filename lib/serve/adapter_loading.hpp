// Runtime adapter loading (POST /v1/load_lora_adapter and /v1/unload_lora_adapter): off unless the
// operator opts in (vLLM likewise needs VLLM_ALLOW_RUNTIME_LORA_UPDATING), and then confined to
// one folder: a client names a folder under --adapter-root, and the server reads only regular
// files there, each under a size cap, so a link to /dev/zero or a FIFO cannot exhaust its memory
// or block a load forever; a load that takes too long is abandoned.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace optkit::serve {

struct AdapterLoading {
  bool enabled = false;
  std::filesystem::path root;                               // lora_path names a folder inside it
  std::size_t max_adapters = 64;                            // registered at once, resident or not
  std::size_t max_name_bytes = 128;                         // lora_name
  std::uintmax_t max_file_bytes = std::uintmax_t{16} << 30; // each file of an adapter folder
  // A load still running this long after its request (queued behind others included) is
  // abandoned before its next layer and answered 504, nothing registered.
  std::chrono::milliseconds load_timeout{120'000};
};

// The folder `lora_path` names, relative to the root or absolute, resolved (links included) and
// checked: inside the root, and holding only regular files no larger than the cap. Throws
// BadRequest("... not an adapter under the adapter root") otherwise, saying nothing of what exists.
std::filesystem::path confined_adapter_folder(const AdapterLoading& loading, const std::string& lora_path);

// Throws BadRequest naming lora_name when it is empty, too long or not printable ASCII.
void check_adapter_name(const AdapterLoading& loading, const std::string& name);

} // namespace optkit::serve
