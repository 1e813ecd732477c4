// A thin RAII layer over the SQLite C API: one connection, prepared statements cached by their
// SQL text, typed binds and reads. Errors become RuntimeFailure naming the database file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

struct sqlite3;
struct sqlite3_stmt;

namespace optkit::archive {

class Statement {
public:
  Statement(sqlite3_stmt* stmt, const std::string* db_name) : m_stmt(stmt), m_db_name(db_name) {}
  ~Statement(); // resets and clears bindings so the cached statement can be reused
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& other) noexcept : m_stmt(other.m_stmt), m_db_name(other.m_db_name) { other.m_stmt = nullptr; }

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
  Statement& bind_null(int index);
  template <typename T> Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind_null(index);
  }

  // Advances to the next row; false when done.
  bool step();
  // Runs a statement that returns no rows.
  void run();

  bool is_null(int column) const;
  std::int64_t int64(int column) const;
  double real(int column) const;
  std::string text(int column) const;
  std::optional<std::int64_t> optional_int64(int column) const;
  std::optional<double> optional_real(int column) const;

private:
  sqlite3_stmt* m_stmt;
  const std::string* m_db_name;
};

class Database {
public:
  // Opens (creating when missing) the database at `path`; ":memory:" for a private in-memory one.
  explicit Database(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements without results (DDL, pragmas, BEGIN/COMMIT).
  void exec(const std::string& sql);
  Statement prepare(const std::string& sql);
  std::int64_t last_insert_id() const;
  int changes() const;
  // Whether the last failed call failed on another connection's lock (SQLITE_BUSY, SQLITE_LOCKED):
  // worth a retry, unlike a file that is no database.
  bool failed_on_lock() const;
  const std::string& name() const { return m_name; }

private:
  sqlite3* m_db = nullptr;
  std::string m_name;
  std::unordered_map<std::string, sqlite3_stmt*> m_cache;
};

} // namespace optkit::archive
