// The run archive: one SQLite file (WAL) that every optkit process — parents and worker
// children alike — writes runs, trials, metrics, artifacts and events into. Each write is its
// own short BEGIN IMMEDIATE transaction (or joins the caller's transaction()), so many
// concurrent writer processes queue on the busy timeout instead of failing, and whatever was
// committed survives the writer being killed.
#pragma once

#include "archive/records.hpp"
#include "archive/sqlite_db.hpp"
#include "core/clock.hpp"

#include <filesystem>
#include <functional>
#include <memory>

namespace optkit::archive {

class RunArchive final : public proc::TrialRecorder {
public:
  // Opens or creates the archive at `path` (parent directories included) and migrates it.
  explicit RunArchive(const std::filesystem::path& path, const Clock& clock = SystemClock::instance());

  const std::filesystem::path& path() const override { return m_path; }
  int schema_version();
  // Directory for files that belong to a run (worker specs, logs): <archive stem>-runs/<id>/.
  std::filesystem::path run_directory(std::int64_t run_id) const;

  // Runs `body` in one write transaction; archive writes inside it join that transaction.
  void transaction(const std::function<void()>& body);

  std::int64_t begin_run(const NewRun& run);
  void finish_run(std::int64_t run_id, RunStatus status, std::optional<int> exit_code, const std::string& error);

  std::int64_t begin_trial(std::int64_t run_id, std::int64_t trial_index, std::int64_t attempt,
                           const nlohmann::json& params) override;
  void finish_trial(std::int64_t trial_id, const TrialEnd& end) override;

  void add_metric(std::int64_t run_id, std::optional<std::int64_t> trial_id, const NewMetric& metric);
  // Hashes the file now; throws RuntimeFailure when it cannot be read.
  std::int64_t add_artifact(std::int64_t run_id, std::optional<std::int64_t> trial_id,
                            const std::filesystem::path& file, const std::string& kind) override;
  void add_event(std::int64_t run_id, std::optional<std::int64_t> trial_id, const std::string& level,
                 const std::string& kind, const std::string& message, const nlohmann::json& data = nullptr) override;

  std::vector<RunRecord> list_runs(const RunFilter& filter);
  std::optional<RunRecord> find_run(std::int64_t run_id);
  // "17" or "last" (the newest run) → a run id; InputError naming the reference otherwise.
  std::int64_t resolve_run(const std::string& reference);
  RunDetail load_run(std::int64_t run_id);
  // Deletes the run and everything recorded under it (foreign keys cascade).
  void remove_run(std::int64_t run_id);

  std::int64_t count(const std::string& table);
  // PRAGMA integrity_check's verdict ("ok" when sound).
  std::string integrity_check();

private:
  void write(const std::function<void()>& body);
  RunRecord read_run_row(const Statement& stmt) const;

  std::filesystem::path m_path;
  const Clock& m_clock;
  std::unique_ptr<Database> m_db;
  int m_transaction_depth = 0;
  std::string m_host;
};

} // namespace optkit::archive
