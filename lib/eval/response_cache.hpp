// Responses already paid for: keyed by (model identity, request body). One append-only log per
// model identity under a cache folder — a line "<sha256 of the request>\t<response JSON>" per
// entry, appended with a single O_APPEND write so concurrent runs can share it — read once into
// memory on first use. A re-run, a second metric over the same generations, or a gate tried twice
// costs no model time.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace optkit::eval {

class ResponseCache {
public:
  // `folder` empty: disabled (every lookup misses, nothing is stored).
  explicit ResponseCache(std::filesystem::path folder);
  ~ResponseCache();
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;

  std::optional<std::string> find(const std::string& model_identity, const std::string& request) const;
  // `response` is the server's JSON body as received.
  void store(const std::string& model_identity, const std::string& request, const std::string& response) const;
  bool enabled() const { return !m_folder.empty(); }

  // $OPTKIT_CACHE_DIR/eval, else $XDG_CACHE_HOME/optkit/eval, else ~/.cache/optkit/eval.
  static std::filesystem::path default_folder();

private:
  struct Log {
    int fd = -1; // the log, open for appending (-1: could not be opened; entries stay in memory)
    std::unordered_map<std::string, std::string> entries;
  };
  Log& log_for(const std::string& model_identity) const; // with m_mutex held

  std::filesystem::path m_folder;
  mutable std::mutex m_mutex;
  mutable std::map<std::string, std::unique_ptr<Log>> m_logs;
};

// What a cache key says about a local model: a digest of every file's name, size and mtime in the
// folder (and the delta's), so an overwritten model misses rather than answering stale; and the
// activation mode it is served in when not the default ("bf16" changes the answers).
std::string local_model_identity(const std::filesystem::path& model, const std::filesystem::path& delta,
                                 const std::string& activations = "fp32");

} // namespace optkit::eval
