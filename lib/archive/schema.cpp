#include "archive/schema.hpp"

#include "archive/sqlite_db.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

namespace optkit::archive {
namespace {

// Times are integer milliseconds since the Unix epoch (UTC); JSON columns hold JSON text.
const char* const k_schema_v1 = R"sql(
CREATE TABLE runs (
  id          INTEGER PRIMARY KEY,
  command     TEXT    NOT NULL,
  argv        TEXT    NOT NULL,
  config      TEXT    NOT NULL,
  version     TEXT    NOT NULL,
  git_commit  TEXT    NOT NULL,
  host        TEXT    NOT NULL,
  pid         INTEGER NOT NULL,
  cwd         TEXT    NOT NULL,
  status      TEXT    NOT NULL
              CHECK (status IN ('running', 'succeeded', 'goal_not_met', 'failed', 'interrupted')),
  exit_code   INTEGER,
  error       TEXT,
  started_at  INTEGER NOT NULL,
  ended_at    INTEGER
);
CREATE INDEX runs_by_start ON runs(started_at);
CREATE INDEX runs_by_command ON runs(command, started_at);

CREATE TABLE trials (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  trial_index INTEGER NOT NULL,
  attempt     INTEGER NOT NULL,
  params      TEXT    NOT NULL,
  status      TEXT    NOT NULL
              CHECK (status IN ('running', 'succeeded', 'failed', 'timed_out', 'interrupted')),
  exit_code   INTEGER,
  signal      INTEGER,
  result      TEXT,
  error       TEXT,
  started_at  INTEGER NOT NULL,
  ended_at    INTEGER,
  UNIQUE (run_id, trial_index, attempt)
);

CREATE TABLE metrics (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  trial_id    INTEGER REFERENCES trials(id) ON DELETE CASCADE,
  name        TEXT    NOT NULL,
  value       REAL,
  unit        TEXT    NOT NULL,
  step        INTEGER,
  recorded_at INTEGER NOT NULL
);
CREATE INDEX metrics_by_run ON metrics(run_id, name);
CREATE INDEX metrics_by_trial ON metrics(trial_id);

CREATE TABLE artifacts (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  trial_id    INTEGER REFERENCES trials(id) ON DELETE CASCADE,
  path        TEXT    NOT NULL,
  kind        TEXT    NOT NULL,
  sha256      TEXT    NOT NULL,
  bytes       INTEGER NOT NULL,
  recorded_at INTEGER NOT NULL
);
CREATE INDEX artifacts_by_run ON artifacts(run_id);
CREATE INDEX artifacts_by_trial ON artifacts(trial_id);

CREATE TABLE events (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  trial_id    INTEGER REFERENCES trials(id) ON DELETE CASCADE,
  time        INTEGER NOT NULL,
  level       TEXT    NOT NULL,
  kind        TEXT    NOT NULL,
  message     TEXT    NOT NULL,
  data        TEXT
);
CREATE INDEX events_by_run ON events(run_id);
CREATE INDEX events_by_trial ON events(trial_id);
)sql";

int
read_int_pragma(Database& db, const char* pragma) {
  auto stmt = db.prepare(fmt::format("PRAGMA {}", pragma));
  return stmt.step() ? static_cast<int>(stmt.int64(0)) : 0;
}

bool
has_tables(Database& db) {
  auto stmt = db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  return stmt.step() && stmt.int64(0) > 0;
}

void
check_identity(Database& db, int version) {
  const int app_id = read_int_pragma(db, "application_id");
  if ((app_id != 0 && app_id != k_application_id) || (app_id == 0 && version == 0 && has_tables(db))) {
    throw InputError(fmt::format("{} is a SQLite database of another application, not an optkit archive; "
                                 "choose another path with --archive",
                                 db.name()));
  }
  if (version > latest_schema_version()) {
    throw InputError(fmt::format("archive {} has schema version {} from a newer optkit (this one knows {}); "
                                 "upgrade optkit or choose another --archive",
                                 db.name(), version, latest_schema_version()));
  }
}

} // namespace

const std::vector<std::string>&
migrations() {
  static const std::vector<std::string> all = {k_schema_v1};
  return all;
}

int
latest_schema_version() {
  return static_cast<int>(migrations().size());
}

int
read_schema_version(Database& db) {
  return read_int_pragma(db, "user_version");
}

void
migrate(Database& db) {
  const int seen = read_schema_version(db);
  check_identity(db, seen);
  if (seen == latest_schema_version()) {
    return;
  }
  db.exec("BEGIN IMMEDIATE");
  try {
    const int version = read_schema_version(db); // another process may have migrated meanwhile
    check_identity(db, version);
    for (int v = version; v < latest_schema_version(); ++v) {
      db.exec(migrations()[static_cast<std::size_t>(v)]);
    }
    db.exec(fmt::format("PRAGMA user_version = {}", latest_schema_version()));
    db.exec(fmt::format("PRAGMA application_id = {}", k_application_id));
    db.exec("COMMIT");
  } catch (...) {
    db.exec("ROLLBACK");
    throw;
  }
}

} // namespace optkit::archive
