#include "eval/response_cache.hpp"

#include "core/atomic_file.hpp"
#include "core/sha256.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace optkit::eval {

ResponseCache::ResponseCache(std::filesystem::path folder) : m_folder(std::move(folder)) {}

std::filesystem::path
ResponseCache::default_folder() {
  if (const char* dir = std::getenv("OPTKIT_CACHE_DIR"); dir != nullptr && *dir != '\0')
    return std::filesystem::path(dir) / "eval";
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir != nullptr && *dir != '\0')
    return std::filesystem::path(dir) / "optkit" / "eval";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::filesystem::path(home) / ".cache" / "optkit" / "eval";
  return {};
}

std::filesystem::path
ResponseCache::entry(const std::string& model_identity, const std::string& request) const {
  const std::string key = sha256_hex(model_identity + '\n' + request);
  return m_folder / key.substr(0, 2) / (key + ".json");
}

std::optional<nlohmann::json>
ResponseCache::find(const std::string& model_identity, const std::string& request) const {
  if (!enabled())
    return std::nullopt;
  std::ifstream in(entry(model_identity, request));
  if (!in)
    return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  auto value = nlohmann::json::parse(text.str(), nullptr, false);
  if (value.is_discarded() || !value.is_object())
    return std::nullopt; // a damaged entry is a miss; the fresh answer overwrites it
  return value;
}

void
ResponseCache::store(const std::string& model_identity, const std::string& request,
                     const nlohmann::json& response) const {
  if (!enabled())
    return;
  const auto path = entry(model_identity, request);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (!ec)
    write_file_atomic(path, response.dump());
}

std::string
local_model_identity(const std::filesystem::path& model, const std::filesystem::path& delta) {
  Sha256 digest;
  for (const auto& folder : {model, delta}) {
    if (folder.empty())
      continue;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(folder))
      if (e.is_regular_file())
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
    digest.update(std::filesystem::absolute(folder).lexically_normal().string() + '\n');
    for (const auto& f : files) {
      const auto size = std::filesystem::file_size(f);
      const auto mtime = std::filesystem::last_write_time(f).time_since_epoch().count();
      digest.update(f.filename().string() + ' ' + std::to_string(size) + ' ' + std::to_string(mtime) + '\n');
    }
  }
  return "local:" + digest.finish_hex();
}

} // namespace optkit::eval
