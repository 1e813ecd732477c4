// The documents a suite is evaluated on, read from the official files users point at: JSONL
// (GSM8K's test.jsonl, IFEval's input_data.jsonl), a JSON list, or CSV with a header row
// (Do-Not-Answer's CSV, RFC 4180 quoting). Every document is a JSON object of its fields.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace optkit::eval {

using Document = nlohmann::ordered_json;

// By extension: .jsonl/.json/.csv. InputError naming the file and line for malformed input (a
// line that is not a JSON object, a CSV row with the wrong number of fields, an unclosed quote);
// for a .parquet file, InputError giving the command that exports it to JSON lines.
std::vector<Document> load_documents(const std::filesystem::path& file);

// The parsers behind load_documents, on bytes already read (`source` names them in errors).
std::vector<Document> parse_json_lines(std::string_view text, const std::string& source);
std::vector<Document> parse_json_list(std::string_view text, const std::string& source);
std::vector<Document> parse_csv(std::string_view text, const std::string& source);

} // namespace optkit::eval
