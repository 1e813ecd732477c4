// Output for people and for programs: one tabular result rendered as an aligned table
// (terminals), CSV (RFC 4180) or JSON (an array of objects keyed by column name).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace optkit {

enum class OutputFormat { table, json, csv };

// "table" | "json" | "csv" → format; InputError naming `flag` otherwise.
OutputFormat parse_output_format(const std::string& text, const std::string& flag = "--format");

class Table {
public:
  explicit Table(std::vector<std::string> columns) : m_columns(std::move(columns)) {}

  // One row; cells are JSON values so JSON output keeps numbers as numbers. Null prints as "-".
  void add_row(std::vector<nlohmann::json> cells);
  std::size_t size() const { return m_rows.size(); }

  std::string render_text(bool color) const;
  std::string render_csv() const;
  nlohmann::json to_json() const;
  std::string render(OutputFormat format, bool color) const;

private:
  std::vector<std::string> m_columns;
  std::vector<std::vector<nlohmann::json>> m_rows;
};

// A JSON cell as plain text: strings unquoted, numbers shortest round-trip, null as "-".
std::string cell_text(const nlohmann::json& cell);

} // namespace optkit
