#include "core/table.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace optkit {

OutputFormat
parse_output_format(const std::string& text, const std::string& flag) {
  if (text == "table") {
    return OutputFormat::table;
  }
  if (text == "json") {
    return OutputFormat::json;
  }
  if (text == "csv") {
    return OutputFormat::csv;
  }
  throw InputError(fmt::format("{} {}: expected table, json or csv", flag, text));
}

std::string
cell_text(const nlohmann::json& cell) {
  if (cell.is_null()) {
    return "-";
  }
  if (cell.is_string()) {
    return cell.get<std::string>();
  }
  if (cell.is_number_float()) {
    return fmt::format("{:.6g}", cell.get<double>());
  }
  return cell.dump();
}

void
Table::add_row(std::vector<nlohmann::json> cells) {
  cells.resize(m_columns.size());
  m_rows.push_back(std::move(cells));
}

std::string
Table::render_text(bool color) const {
  std::vector<std::size_t> widths;
  for (const auto& c : m_columns) {
    widths.push_back(c.size());
  }
  std::vector<std::vector<std::string>> texts;
  for (const auto& row : m_rows) {
    std::vector<std::string> line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      // A table cell stays on one line.
      std::string text = cell_text(row[i]);
      std::replace(text.begin(), text.end(), '\n', ' ');
      widths[i] = std::max(widths[i], text.size());
      line.push_back(std::move(text));
    }
    texts.push_back(std::move(line));
  }
  const auto format_line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const bool last = i + 1 == cells.size();
      out += last ? cells[i] : fmt::format("{:<{}}  ", cells[i], widths[i]);
    }
    return out + "\n";
  };
  std::string header = format_line(m_columns);
  if (color) {
    header = "\x1b[1m" + header.substr(0, header.size() - 1) + "\x1b[0m\n";
  }
  std::string out = header;
  for (const auto& line : texts) {
    out += format_line(line);
  }
  return out;
}

std::string
Table::render_csv() const {
  std::vector<std::string> header;
  for (const auto& c : m_columns) {
    header.push_back(csv_field(c));
  }
  std::string out = join(header, ",") + "\n";
  for (const auto& row : m_rows) {
    std::vector<std::string> fields;
    for (const auto& cell : row) {
      fields.push_back(cell.is_null() ? "" : csv_field(cell_text(cell)));
    }
    out += join(fields, ",") + "\n";
  }
  return out;
}

nlohmann::json
Table::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : m_rows) {
    nlohmann::json object = nlohmann::json::object();
    for (std::size_t i = 0; i < m_columns.size(); ++i) {
      object[m_columns[i]] = row[i];
    }
    out.push_back(std::move(object));
  }
  return out;
}

std::string
Table::render(OutputFormat format, bool color) const {
  switch (format) {
  case OutputFormat::json:
    return to_json().dump(2) + "\n";
  case OutputFormat::csv:
    return render_csv();
  case OutputFormat::table:
    break;
  }
  return render_text(color);
}

} // namespace optkit
