#include "serve/adapter_loading.hpp"

#include "serve/openai_protocol.hpp"

#include <algorithm>
#include <system_error>

namespace optkit::serve {

namespace {

[[noreturn]] void
refuse(const std::string& lora_path) {
  // The same answer whatever failed, so a client cannot map the server's filesystem.
  throw BadRequest("lora_path '" + lora_path + "' is not an adapter under the adapter root", "lora_path");
}

// True when `path` is `root` or lies below it (both canonical).
bool
inside(const std::filesystem::path& path, const std::filesystem::path& root) {
  return std::mismatch(root.begin(), root.end(), path.begin(), path.end()).first == root.end();
}

} // namespace

std::filesystem::path
confined_adapter_folder(const AdapterLoading& loading, const std::string& lora_path) {
  std::error_code ec;
  const auto root = std::filesystem::canonical(loading.root, ec);
  if (ec || lora_path.empty() || lora_path.find('\0') != std::string::npos)
    refuse(lora_path);
  const std::filesystem::path named(lora_path);
  const auto folder = std::filesystem::canonical(named.is_absolute() ? named : root / named, ec);
  if (ec || folder == root || !inside(folder, root) || !std::filesystem::is_directory(folder, ec))
    refuse(lora_path);
  // Every file a regular one (not a link, FIFO or device) within the cap: the loader opens files
  // of the folder by name, and any of them may be one it opens. Subfolders are not read.
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const auto status = it->symlink_status(ec);
    if (!ec && std::filesystem::is_directory(status))
      continue;
    if (ec || !std::filesystem::is_regular_file(status) || it->file_size(ec) > loading.max_file_bytes || ec)
      refuse(lora_path);
  }
  if (ec)
    refuse(lora_path);
  return folder;
}

void
check_adapter_name(const AdapterLoading& loading, const std::string& name) {
  const bool printable =
      std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 127 && c != '"' && c != '\\'; });
  if (name.empty() || name.size() > loading.max_name_bytes || !printable)
    throw BadRequest("'lora_name' must be 1 to " + std::to_string(loading.max_name_bytes) +
                         " printable ASCII characters, without spaces, quotes or backslashes",
                     "lora_name");
}

} // namespace optkit::serve
