#include "eval/response_cache.hpp"

#include "core/sha256.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

namespace optkit::eval {

ResponseCache::ResponseCache(std::filesystem::path folder) : m_folder(std::move(folder)) {}

ResponseCache::~ResponseCache() {
  for (auto& [identity, log] : m_logs)
    if (log->fd >= 0)
      ::close(log->fd);
}

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

ResponseCache::Log&
ResponseCache::log_for(const std::string& model_identity) const {
  auto& slot = m_logs[model_identity];
  if (slot)
    return *slot;
  slot = std::make_unique<Log>();
  std::error_code ec;
  std::filesystem::create_directories(m_folder, ec);
  const auto file = m_folder / (sha256_hex(model_identity).substr(0, 32) + ".jsonl");
  std::ifstream in(file, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    // A line cut short by a crash, or damaged, is skipped: that entry is a miss.
    const auto tab = line.find('\t');
    if (tab != 64 || !nlohmann::json::accept(std::string_view(line).substr(tab + 1)))
      continue;
    slot->entries[line.substr(0, tab)] = line.substr(tab + 1);
  }
  slot->fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  return *slot;
}

std::optional<std::string>
ResponseCache::find(const std::string& model_identity, const std::string& request) const {
  if (!enabled())
    return std::nullopt;
  const std::string key = sha256_hex(request);
  std::lock_guard lock(m_mutex);
  const auto& entries = log_for(model_identity).entries;
  const auto it = entries.find(key);
  if (it == entries.end())
    return std::nullopt;
  return it->second;
}

void
ResponseCache::store(const std::string& model_identity, const std::string& request, const std::string& response) const {
  if (!enabled())
    return;
  // One entry per line: a pretty-printed body is made compact first.
  const std::string body =
      response.find('\n') == std::string::npos ? response : nlohmann::json::parse(response, nullptr, false).dump();
  const std::string key = sha256_hex(request);
  const std::string line = key + '\t' + body + '\n';
  std::lock_guard lock(m_mutex);
  auto& log = log_for(model_identity);
  log.entries[key] = body;
  if (log.fd >= 0) {
    // One write(2) with O_APPEND: lines from concurrent runs interleave whole on a local file
    // system. A short write leaves a damaged last line, which the next load skips.
    [[maybe_unused]] const auto written = ::write(log.fd, line.data(), line.size());
  }
}

std::string
local_model_identity(const std::filesystem::path& model, const std::filesystem::path& delta,
                     const std::string& activations) {
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
  return "local:" + digest.finish_hex() + (activations.empty() || activations == "fp32" ? "" : "+" + activations);
}

} // namespace optkit::eval
