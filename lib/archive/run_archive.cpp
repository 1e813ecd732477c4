#include "archive/run_archive.hpp"

#include "archive/schema.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/process_identity.hpp"
#include "core/sha256.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <thread>
#include <unistd.h>

namespace optkit::archive {
namespace {

std::string
current_directory() {
  std::error_code ec;
  return std::filesystem::current_path(ec).string();
}

nlohmann::json
parse_json_column(const std::string& text) {
  if (text.empty()) {
    return nullptr;
  }
  return nlohmann::json::parse(text, nullptr, false);
}

std::string
json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void
configure_connection(Database& db) {
  db.exec("PRAGMA busy_timeout = 60000");
  // Switching to WAL needs a brief exclusive lock; several processes opening a new archive at
  // once may find it taken even past the busy handler, so retry a few times.
  for (int attempt = 0;; ++attempt) {
    try {
      db.exec("PRAGMA journal_mode = WAL");
      break;
    } catch (const RuntimeFailure&) {
      if (attempt >= 50 || !db.failed_on_lock()) // a garbage file: refused at once
        throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + 10 * attempt));
    }
  }
  // In WAL mode NORMAL loses nothing on a process crash; only an OS crash or power loss can
  // drop the last transactions.
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA foreign_keys = ON");
}

constexpr const char* k_run_columns =
    "id, command, argv, config, version, git_commit, host, pid, cwd, status, exit_code, error, started_at, ended_at";

} // namespace

RunArchive::RunArchive(const std::filesystem::path& path, const Clock& clock)
    : m_path(path), m_clock(clock), m_host(host_name()) {
  if (path != ":memory:" && path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      throw RuntimeFailure(fmt::format("archive {}: cannot create directory {}: {}; choose another with --archive",
                                       path.string(), path.parent_path().string(), ec.message()));
    }
  }
  m_db = std::make_unique<Database>(path.string());
  configure_connection(*m_db);
  migrate(*m_db);
}

int
RunArchive::schema_version() {
  return read_schema_version(*m_db);
}

std::filesystem::path
RunArchive::run_directory(std::int64_t run_id) const {
  const auto base = m_path.parent_path() / (m_path.stem().string() + "-runs");
  return base / std::to_string(run_id);
}

void
RunArchive::transaction(const std::function<void()>& body) {
  write(body);
}

void
RunArchive::write(const std::function<void()>& body) {
  if (m_transaction_depth > 0) {
    body();
    return;
  }
  m_db->exec("BEGIN IMMEDIATE");
  ++m_transaction_depth;
  try {
    body();
    m_db->exec("COMMIT");
    --m_transaction_depth;
  } catch (...) {
    --m_transaction_depth;
    try {
      m_db->exec("ROLLBACK");
    } catch (const Error&) {
      // The transaction is already gone (SQLite rolls back on some errors by itself).
    }
    throw;
  }
}

std::int64_t
RunArchive::begin_run(const NewRun& run) {
  const BuildInfo& build = build_info();
  std::int64_t id = 0;
  write([&] {
    m_db->prepare("INSERT INTO runs (command, argv, config, version, git_commit, host, pid, cwd, status, started_at) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)")
        .bind(1, run.command)
        .bind(2, json_text(run.argv))
        .bind(3, json_text(run.config))
        .bind(4, build.version)
        .bind(5, build.git_commit)
        .bind(6, m_host)
        .bind(7, static_cast<std::int64_t>(::getpid()))
        .bind(8, current_directory())
        .bind(9, m_clock.wall_ms())
        .run();
    id = m_db->last_insert_id();
  });
  return id;
}

void
RunArchive::finish_run(std::int64_t run_id, RunStatus status, std::optional<int> exit_code, const std::string& error) {
  write([&] {
    auto stmt = m_db->prepare("UPDATE runs SET status = ?, exit_code = ?, error = ?, ended_at = ? WHERE id = ?");
    stmt.bind(1, to_string(status)).bind(2, exit_code).bind(4, m_clock.wall_ms()).bind(5, run_id);
    if (error.empty()) {
      stmt.bind_null(3);
    } else {
      stmt.bind(3, error);
    }
    stmt.run();
  });
}

std::int64_t
RunArchive::begin_trial(std::int64_t run_id, std::int64_t trial_index, std::int64_t attempt,
                        const nlohmann::json& params) {
  std::int64_t id = 0;
  write([&] {
    m_db->prepare("INSERT INTO trials (run_id, trial_index, attempt, params, status, started_at) "
                  "VALUES (?, ?, ?, ?, 'running', ?)")
        .bind(1, run_id)
        .bind(2, trial_index)
        .bind(3, attempt)
        .bind(4, json_text(params.is_null() ? nlohmann::json::object() : params))
        .bind(5, m_clock.wall_ms())
        .run();
    id = m_db->last_insert_id();
  });
  return id;
}

void
RunArchive::finish_trial(std::int64_t trial_id, const TrialEnd& end) {
  write([&] {
    auto stmt = m_db->prepare(
        "UPDATE trials SET status = ?, exit_code = ?, signal = ?, result = ?, error = ?, ended_at = ? WHERE id = ?");
    stmt.bind(1, to_string(end.status)).bind(2, end.exit_code).bind(3, end.signal);
    if (end.result.is_null()) {
      stmt.bind_null(4);
    } else {
      stmt.bind(4, json_text(end.result));
    }
    if (end.error.empty()) {
      stmt.bind_null(5);
    } else {
      stmt.bind(5, end.error);
    }
    stmt.bind(6, m_clock.wall_ms()).bind(7, trial_id).run();
    if (end.peak_rss_bytes)
      m_db->prepare("INSERT INTO metrics (run_id, trial_id, name, value, unit, step, recorded_at) "
                    "SELECT run_id, id, 'peak_rss_bytes', ?, 'B', NULL, ? FROM trials WHERE id = ?")
          .bind(1, static_cast<double>(*end.peak_rss_bytes))
          .bind(2, m_clock.wall_ms())
          .bind(3, trial_id)
          .run();
  });
}

void
RunArchive::add_metric(std::int64_t run_id, std::optional<std::int64_t> trial_id, const NewMetric& metric) {
  write([&] {
    auto stmt = m_db->prepare(
        "INSERT INTO metrics (run_id, trial_id, name, value, unit, step, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)");
    stmt.bind(1, run_id).bind(2, trial_id).bind(3, metric.name);
    if (std::isfinite(metric.value)) {
      stmt.bind(4, metric.value);
    } else {
      stmt.bind_null(4);
    }
    stmt.bind(5, metric.unit).bind(6, metric.step).bind(7, m_clock.wall_ms()).run();
  });
}

std::int64_t
RunArchive::add_artifact(std::int64_t run_id, std::optional<std::int64_t> trial_id, const std::filesystem::path& file,
                         const std::string& kind) {
  const FileDigest digest = digest_file(file); // outside the transaction: hashing can be slow
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(file, ec);
  std::int64_t id = 0;
  write([&] {
    m_db->prepare("INSERT INTO artifacts (run_id, trial_id, path, kind, sha256, bytes, recorded_at) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?)")
        .bind(1, run_id)
        .bind(2, trial_id)
        .bind(3, (ec ? file : absolute).string())
        .bind(4, kind)
        .bind(5, digest.sha256)
        .bind(6, static_cast<std::int64_t>(digest.bytes))
        .bind(7, m_clock.wall_ms())
        .run();
    id = m_db->last_insert_id();
  });
  return id;
}

void
RunArchive::add_event(std::int64_t run_id, std::optional<std::int64_t> trial_id, const std::string& level,
                      const std::string& kind, const std::string& message, const nlohmann::json& data) {
  write([&] {
    auto stmt = m_db->prepare(
        "INSERT INTO events (run_id, trial_id, time, level, kind, message, data) VALUES (?, ?, ?, ?, ?, ?, ?)");
    stmt.bind(1, run_id).bind(2, trial_id).bind(3, m_clock.wall_ms()).bind(4, level).bind(5, kind).bind(6, message);
    if (data.is_null()) {
      stmt.bind_null(7);
    } else {
      stmt.bind(7, json_text(data));
    }
    stmt.run();
  });
}

RunRecord
RunArchive::read_run_row(const Statement& stmt) const {
  RunRecord r;
  r.id = stmt.int64(0);
  r.command = stmt.text(1);
  r.argv = parse_json_column(stmt.text(2));
  r.config = parse_json_column(stmt.text(3));
  r.version = stmt.text(4);
  r.git_commit = stmt.text(5);
  r.host = stmt.text(6);
  r.pid = stmt.int64(7);
  r.cwd = stmt.text(8);
  r.status = stmt.text(9);
  r.exit_code = stmt.optional_int64(10);
  r.error = stmt.text(11);
  r.started_at = stmt.int64(12);
  r.ended_at = stmt.optional_int64(13);
  if (r.status == "running" && r.host == m_host && process_is_gone(r.pid)) {
    r.status = "abandoned";
  }
  return r;
}

std::vector<RunRecord>
RunArchive::list_runs(const RunFilter& filter) {
  std::string sql = fmt::format("SELECT {} FROM runs WHERE 1", k_run_columns);
  std::string command_pattern;
  if (filter.command) {
    command_pattern = *filter.command;
    if (!command_pattern.empty() && command_pattern.back() == '*') {
      command_pattern.pop_back();
      sql += " AND substr(command, 1, length(?1)) = ?1";
    } else {
      sql += " AND command = ?1";
    }
  }
  // "abandoned" is derived when rows are read, so it filters after the query.
  const bool abandoned = filter.status && *filter.status == "abandoned";
  if (filter.status) {
    sql += " AND status = ?2";
  }
  if (filter.since) {
    sql += " AND started_at >= ?3";
  }
  sql += " ORDER BY id DESC";
  auto stmt = m_db->prepare(sql);
  if (filter.command) {
    stmt.bind(1, command_pattern);
  }
  if (filter.status) {
    stmt.bind(2, abandoned ? std::string("running") : *filter.status);
  }
  if (filter.since) {
    stmt.bind(3, *filter.since);
  }
  std::vector<RunRecord> runs;
  while (stmt.step()) {
    RunRecord run = read_run_row(stmt);
    if (filter.status && run.status != *filter.status) {
      continue;
    }
    runs.push_back(std::move(run));
    if (filter.limit && static_cast<std::int64_t>(runs.size()) >= *filter.limit) {
      break;
    }
  }
  return runs;
}

std::optional<RunRecord>
RunArchive::find_run(std::int64_t run_id) {
  auto stmt = m_db->prepare(fmt::format("SELECT {} FROM runs WHERE id = ?", k_run_columns));
  stmt.bind(1, run_id);
  if (!stmt.step()) {
    return std::nullopt;
  }
  return read_run_row(stmt);
}

std::int64_t
RunArchive::resolve_run(const std::string& reference) {
  if (reference == "last") {
    auto stmt = m_db->prepare("SELECT max(id) FROM runs");
    if (stmt.step() && !stmt.is_null(0)) {
      return stmt.int64(0);
    }
    throw InputError(fmt::format("run 'last': archive {} has no runs yet", m_path.string()));
  }
  std::int64_t id = 0;
  const auto [end, ec] = std::from_chars(reference.data(), reference.data() + reference.size(), id);
  if (ec != std::errc() || end != reference.data() + reference.size() || id <= 0) {
    throw InputError(
        fmt::format("run '{}': expected a run id (a positive number, see 'optkit runs list') or 'last'", reference));
  }
  if (!find_run(id)) {
    throw InputError(
        fmt::format("run {} is not in archive {}; 'optkit runs list' shows the runs it holds", id, m_path.string()));
  }
  return id;
}

RunDetail
RunArchive::load_run(std::int64_t run_id) {
  RunDetail detail;
  auto run = find_run(run_id);
  if (!run) {
    throw InputError(fmt::format("run {} is not in archive {}", run_id, m_path.string()));
  }
  detail.run = std::move(*run);
  {
    auto stmt = m_db->prepare("SELECT id, trial_index, attempt, params, status, exit_code, signal, result, error, "
                              "started_at, ended_at FROM trials WHERE run_id = ? ORDER BY trial_index, attempt");
    stmt.bind(1, run_id);
    while (stmt.step()) {
      TrialRecord t;
      t.id = stmt.int64(0);
      t.run_id = run_id;
      t.trial_index = stmt.int64(1);
      t.attempt = stmt.int64(2);
      t.params = parse_json_column(stmt.text(3));
      t.status = stmt.text(4);
      t.exit_code = stmt.optional_int64(5);
      t.signal = stmt.optional_int64(6);
      t.result = parse_json_column(stmt.text(7));
      t.error = stmt.text(8);
      t.started_at = stmt.int64(9);
      t.ended_at = stmt.optional_int64(10);
      if (t.status == "running" && detail.run.status == "abandoned")
        t.status = "abandoned"; // its run's process is gone, so no one runs it
      detail.trials.push_back(std::move(t));
    }
  }
  {
    auto stmt = m_db->prepare(
        "SELECT id, trial_id, name, value, unit, step, recorded_at FROM metrics WHERE run_id = ? ORDER BY id");
    stmt.bind(1, run_id);
    while (stmt.step()) {
      detail.metrics.push_back({stmt.int64(0), run_id, stmt.optional_int64(1), stmt.text(2), stmt.optional_real(3),
                                stmt.text(4), stmt.optional_int64(5), stmt.int64(6)});
    }
  }
  {
    auto stmt = m_db->prepare(
        "SELECT id, trial_id, path, kind, sha256, bytes, recorded_at FROM artifacts WHERE run_id = ? ORDER BY id");
    stmt.bind(1, run_id);
    while (stmt.step()) {
      detail.artifacts.push_back({stmt.int64(0), run_id, stmt.optional_int64(1), stmt.text(2), stmt.text(3),
                                  stmt.text(4), stmt.int64(5), stmt.int64(6)});
    }
  }
  {
    auto stmt =
        m_db->prepare("SELECT id, trial_id, time, level, kind, message, data FROM events WHERE run_id = ? ORDER BY id");
    stmt.bind(1, run_id);
    while (stmt.step()) {
      detail.events.push_back({stmt.int64(0), run_id, stmt.optional_int64(1), stmt.int64(2), stmt.text(3), stmt.text(4),
                               stmt.text(5), parse_json_column(stmt.text(6))});
    }
  }
  return detail;
}

void
RunArchive::remove_run(std::int64_t run_id) {
  write([&] {
    m_db->prepare("DELETE FROM runs WHERE id = ?").bind(1, run_id).run();
    if (m_db->changes() == 0) {
      throw InputError(fmt::format("run {} is not in archive {}", run_id, m_path.string()));
    }
  });
}

std::int64_t
RunArchive::count(const std::string& table) {
  static const std::vector<std::string> tables = {"runs", "trials", "metrics", "artifacts", "events"};
  if (std::find(tables.begin(), tables.end(), table) == tables.end()) {
    throw InputError(fmt::format("unknown archive table '{}'", table));
  }
  auto stmt = m_db->prepare("SELECT count(*) FROM " + table);
  return stmt.step() ? stmt.int64(0) : 0;
}

std::string
RunArchive::integrity_check() {
  auto stmt = m_db->prepare("PRAGMA integrity_check");
  std::string verdict;
  while (stmt.step()) {
    verdict += (verdict.empty() ? "" : "; ") + stmt.text(0);
  }
  return verdict;
}

} // namespace optkit::archive
