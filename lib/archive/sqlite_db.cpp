#include "archive/sqlite_db.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

namespace optkit::archive {
namespace {

[[noreturn]] void
fail(const std::string& db_name, sqlite3* db, const std::string& what) {
  const int code = sqlite3_extended_errcode(db);
  std::string hint;
  if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
    hint = "; another process held the archive locked for too long, try again";
  } else if ((code & 0xff) == SQLITE_READONLY || (code & 0xff) == SQLITE_CANTOPEN) {
    hint = "; check the path and its permissions, or choose another with --archive";
  } else if ((code & 0xff) == SQLITE_NOTADB || (code & 0xff) == SQLITE_CORRUPT) {
    hint = "; the file is not a valid SQLite database, point --archive elsewhere";
  }
  throw RuntimeFailure(fmt::format("archive {}: {}: {}{}", db_name, what, sqlite3_errmsg(db), hint));
}

} // namespace

Statement::~Statement() {
  if (m_stmt) {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
  }
}

Statement&
Statement::bind(int index, std::int64_t value) {
  if (sqlite3_bind_int64(m_stmt, index, value) != SQLITE_OK) {
    fail(*m_db_name, sqlite3_db_handle(m_stmt), "bind");
  }
  return *this;
}

Statement&
Statement::bind(int index, double value) {
  if (sqlite3_bind_double(m_stmt, index, value) != SQLITE_OK) {
    fail(*m_db_name, sqlite3_db_handle(m_stmt), "bind");
  }
  return *this;
}

Statement&
Statement::bind(int index, std::string_view value) {
  if (sqlite3_bind_text64(m_stmt, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8) != SQLITE_OK) {
    fail(*m_db_name, sqlite3_db_handle(m_stmt), "bind");
  }
  return *this;
}

Statement&
Statement::bind_null(int index) {
  if (sqlite3_bind_null(m_stmt, index) != SQLITE_OK) {
    fail(*m_db_name, sqlite3_db_handle(m_stmt), "bind");
  }
  return *this;
}

bool
Statement::step() {
  const int rc = sqlite3_step(m_stmt);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  fail(*m_db_name, sqlite3_db_handle(m_stmt), fmt::format("executing '{}'", sqlite3_sql(m_stmt)));
}

void
Statement::run() {
  while (step()) {
  }
}

bool
Statement::is_null(int column) const {
  return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
}

std::int64_t
Statement::int64(int column) const {
  return sqlite3_column_int64(m_stmt, column);
}

double
Statement::real(int column) const {
  return sqlite3_column_double(m_stmt, column);
}

std::string
Statement::text(int column) const {
  const auto* data = sqlite3_column_text(m_stmt, column);
  const int size = sqlite3_column_bytes(m_stmt, column);
  return data ? std::string(reinterpret_cast<const char*>(data), static_cast<std::size_t>(size)) : std::string();
}

std::optional<std::int64_t>
Statement::optional_int64(int column) const {
  return is_null(column) ? std::nullopt : std::optional<std::int64_t>(int64(column));
}

std::optional<double>
Statement::optional_real(int column) const {
  return is_null(column) ? std::nullopt : std::optional<double>(real(column));
}

Database::Database(const std::string& path) : m_name(path) {
  const int rc =
      sqlite3_open_v2(path.c_str(), &m_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = m_db ? sqlite3_errmsg(m_db) : "out of memory";
    sqlite3_close(m_db);
    throw RuntimeFailure(
        fmt::format("archive {}: cannot open: {}; check the path or choose another with --archive", path, message));
  }
  sqlite3_extended_result_codes(m_db, 1);
}

Database::~Database() {
  for (auto& [sql, stmt] : m_cache) {
    sqlite3_finalize(stmt);
  }
  sqlite3_close(m_db);
}

void
Database::exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    sqlite3_free(message);
    fail(m_name, m_db, fmt::format("executing '{}'", sql.substr(0, 60)));
  }
}

bool
Database::failed_on_lock() const {
  const int code = sqlite3_extended_errcode(m_db) & 0xff;
  return code == SQLITE_BUSY || code == SQLITE_LOCKED;
}

Statement
Database::prepare(const std::string& sql) {
  auto found = m_cache.find(sql);
  if (found == m_cache.end()) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(m_db, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt,
                           nullptr) != SQLITE_OK) {
      fail(m_name, m_db, fmt::format("preparing '{}'", sql.substr(0, 60)));
    }
    found = m_cache.emplace(sql, stmt).first;
  }
  return Statement(found->second, &m_name);
}

std::int64_t
Database::last_insert_id() const {
  return sqlite3_last_insert_rowid(m_db);
}

int
Database::changes() const {
  return sqlite3_changes(m_db);
}

} // namespace optkit::archive
