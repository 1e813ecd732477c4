#include "eval/task_documents.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"

#include <fmt/format.h>

namespace optkit::eval {

namespace {

// One CSV record starting at `pos`; advances `pos` past its line end. `line` counts newlines read.
std::vector<std::string>
csv_record(std::string_view text, std::size_t& pos, std::size_t& line, const std::string& source) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  const std::size_t start_line = line;
  while (pos < text.size()) {
    const char c = text[pos];
    if (quoted) {
      if (c == '"') {
        if (pos + 1 < text.size() && text[pos + 1] == '"') {
          fields.back().push_back('"');
          pos += 2;
          continue;
        }
        quoted = false;
      } else {
        if (c == '\n')
          ++line;
        fields.back().push_back(c);
      }
      ++pos;
      continue;
    }
    if (c == '"' && fields.back().empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\r' && pos + 1 < text.size() && text[pos + 1] == '\n') {
      // CRLF: the '\n' ends the record next.
    } else if (c == '\n') {
      ++pos;
      ++line;
      return fields;
    } else {
      fields.back().push_back(c);
    }
    ++pos;
  }
  if (quoted)
    throw InputError(fmt::format("{}:{}: a quoted CSV field is never closed", source, start_line));
  return fields;
}

} // namespace

std::vector<Document>
parse_json_lines(std::string_view text, const std::string& source) {
  std::vector<Document> docs;
  std::size_t line = 0, pos = 0;
  while (pos < text.size()) {
    const auto end = text.find('\n', pos);
    const auto row = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    ++line;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos)
      continue;
    auto doc = Document::parse(row, nullptr, false);
    if (doc.is_discarded() || !doc.is_object())
      throw InputError(fmt::format("{}:{}: not a JSON object (JSONL: one object per line)", source, line));
    docs.push_back(std::move(doc));
  }
  return docs;
}

std::vector<Document>
parse_json_list(std::string_view text, const std::string& source) {
  auto doc = Document::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_array())
    throw InputError(source + ": not a JSON list of objects");
  std::vector<Document> docs;
  for (auto& item : doc) {
    if (!item.is_object())
      throw InputError(fmt::format("{}: item {} is not a JSON object", source, docs.size()));
    docs.push_back(std::move(item));
  }
  return docs;
}

std::vector<Document>
parse_csv(std::string_view text, const std::string& source) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF")
    text.remove_prefix(3); // a UTF-8 byte order mark, as spreadsheets write
  std::size_t pos = 0, line = 1;
  const auto header = csv_record(text, pos, line, source);
  if (header.size() == 1 && header[0].empty())
    throw InputError(source + ": empty CSV (a header row naming the fields comes first)");
  std::vector<Document> docs;
  while (pos < text.size()) {
    const std::size_t row_line = line;
    const auto fields = csv_record(text, pos, line, source);
    if (fields.size() == 1 && fields[0].empty())
      continue; // a blank line
    if (fields.size() != header.size())
      throw InputError(
          fmt::format("{}:{}: {} fields where the header has {}", source, row_line, fields.size(), header.size()));
    Document doc = Document::object();
    for (std::size_t i = 0; i < header.size(); ++i)
      doc[header[i]] = fields[i];
    docs.push_back(std::move(doc));
  }
  return docs;
}

std::vector<Document>
load_documents(const std::filesystem::path& file) {
  const auto ext = file.extension().string();
  if (ext == ".parquet") // the Hub's format: read after an export to JSON lines
    throw InputError(file.string() +
                     ": Parquet is read as JSON lines: export it first, e.g. python3 -c \"import pandas as p; "
                     "p.read_parquet('" +
                     file.string() + "').to_json('" + file.stem().string() +
                     ".jsonl', orient='records', lines=True)\" (or the dataset's to_json), then --data " +
                     file.stem().string() + ".jsonl");
  const std::string text = read_input_file(file);
  if (ext == ".csv")
    return parse_csv(text, file.string());
  if (ext == ".json")
    return parse_json_list(text, file.string());
  if (ext == ".jsonl")
    return parse_json_lines(text, file.string());
  throw InputError(file.string() + ": unknown document format (expected .jsonl, .json or .csv)");
}

} // namespace optkit::eval
