// Responses already paid for: keyed by (model identity, request body), one small JSON file per
// entry under a cache folder, written atomically so concurrent runs share it safely. A re-run, a
// second metric over the same generations, or a gate tried twice costs no model time.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace optkit::eval {

class ResponseCache {
public:
  // `folder` empty: disabled (every lookup misses, nothing is stored).
  explicit ResponseCache(std::filesystem::path folder);

  std::optional<nlohmann::json> find(const std::string& model_identity, const std::string& request) const;
  void store(const std::string& model_identity, const std::string& request, const nlohmann::json& response) const;
  bool enabled() const { return !m_folder.empty(); }

  // $OPTKIT_CACHE_DIR/eval, else $XDG_CACHE_HOME/optkit/eval, else ~/.cache/optkit/eval.
  static std::filesystem::path default_folder();

private:
  std::filesystem::path entry(const std::string& model_identity, const std::string& request) const;
  std::filesystem::path m_folder;
};

// What a cache key says about a local model: a digest of every file's name, size and mtime in the
// folder (and the delta's), so an overwritten model misses rather than answering stale.
std::string local_model_identity(const std::filesystem::path& model, const std::filesystem::path& delta);

} // namespace optkit::eval
