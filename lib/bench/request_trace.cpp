#include "bench/request_trace.hpp"

#include "bench/json_lines.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

namespace optkit::bench {

namespace {

constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;

InputError
bad_row(const std::string& source, std::size_t line, const std::string& why) {
  return InputError(fmt::format("{}:{}: {}", source, line, why));
}

// A JSON row's token count `name` (or `alias`), 0 when it has neither.
std::int64_t
json_length(const nlohmann::json& row, const char* name, const char* alias, const std::string& source,
            std::size_t line) {
  auto it = row.find(name);
  if (it == row.end() && alias)
    it = row.find(alias);
  if (it == row.end())
    return 0;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > kMaxTokens)
    throw bad_row(source, line, fmt::format("'{}' is not a token count in 1..16777216", it.key()));
  return it->get<std::int64_t>();
}

double
json_timestamp(const nlohmann::json& row, const char* unit, const std::string& source, std::size_t line) {
  const auto t = row.find("timestamp");
  if (t == row.end() || !t->is_number() || !std::isfinite(t->get<double>()))
    throw bad_row(source, line, fmt::format("'timestamp' ({}) is missing or not a number", unit));
  return t->get<double>();
}

std::vector<std::int64_t>
hash_ids(const nlohmann::json& row, const std::string& source, std::size_t line) {
  const auto it = row.find("hash_ids");
  if (it == row.end())
    return {};
  if (!it->is_array() || it->size() > static_cast<std::size_t>(kMaxTokens))
    throw bad_row(source, line, "'hash_ids' is not a list of block ids");
  std::vector<std::int64_t> ids;
  for (const auto& id : *it) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0)
      throw bad_row(source, line, fmt::format("'hash_ids' holds {}, not a block id (an integer from 0)", id.dump()));
    ids.push_back(id.get<std::int64_t>());
  }
  return ids;
}

std::vector<TraceRequest>
parse_json_rows(const std::string& text, const std::string& source, bool mooncake) {
  std::vector<TraceRequest> rows;
  const char* example = mooncake ? R"({"timestamp": MS, "input_length": N, "output_length": N, "hash_ids": [..]})"
                                 : R"({"timestamp": SECONDS, "input_tokens": N, "output_tokens": N})";
  for_each_json_line(text, source, example, [&](const nlohmann::json& row, std::size_t line) {
    TraceRequest r;
    r.timestamp = mooncake ? json_timestamp(row, "milliseconds", source, line) / 1000
                           : json_timestamp(row, "seconds", source, line);
    r.input_tokens = json_length(row, "input_tokens", "input_length", source, line);
    r.output_tokens = json_length(row, "output_tokens", "output_length", source, line);
    if (mooncake)
      r.prefix_blocks = hash_ids(row, source, line);
    rows.push_back(std::move(r));
  });
  return rows;
}

std::vector<std::string>
csv_fields(std::string_view line) {
  std::vector<std::string> fields(1);
  for (const char c : line) {
    if (c == ',')
      fields.emplace_back();
    else if (c != '\r' && c != '"')
      fields.back() += c;
  }
  return fields;
}

// "2023-11-16 18:17:03.979" (any number of fractional digits; a 'T' may part date and time) as
// seconds since 1970-01-01, read as UTC; nullopt when it is not one.
std::optional<double>
datetime_seconds(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  double s = 0;
  char sep = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%c%2d:%2d:%lf%c", &y, &mo, &d, &sep, &h, &mi, &s, &tail) != 7 ||
      (sep != ' ' && sep != 'T') || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || !(s >= 0) || s >= 61)
    return std::nullopt;
  // Days from the civil date (Howard Hinnant's algorithm).
  const int yy = y - (mo <= 2 ? 1 : 0);
  const int era = (yy >= 0 ? yy : yy - 399) / 400;
  const int yoe = yy - era * 400;
  const int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const double days = static_cast<double>(era) * 146097 + doe - 719468;
  return days * 86400 + h * 3600 + mi * 60 + s;
}

std::int64_t
csv_length(const std::string& field, const char* name, const std::string& source, std::size_t line) {
  std::int64_t value = -1;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (error != std::errc() || end != field.data() + field.size() || value < 0 || value > kMaxTokens)
    throw bad_row(source, line, fmt::format("{} '{}' is not a token count in 0..16777216", name, field));
  return value;
}

std::vector<TraceRequest>
parse_azure_csv(const std::string& text, const std::string& source) {
  std::vector<TraceRequest> rows;
  std::map<std::string, std::size_t> column;
  std::size_t line = 0, begin = 0;
  while (begin < text.size()) {
    auto end = text.find('\n', begin);
    if (end == std::string::npos)
      end = text.size();
    const std::string_view row(text.data() + begin, end - begin);
    begin = end + 1;
    ++line;
    if (row.empty() || row == "\r")
      continue;
    const auto fields = csv_fields(row);
    if (column.empty()) {
      for (std::size_t i = 0; i < fields.size(); ++i)
        column[fields[i]] = i;
      for (const char* name : {"TIMESTAMP", "ContextTokens", "GeneratedTokens"})
        if (!column.contains(name))
          throw bad_row(source, line,
                        fmt::format("the header names no '{}' column (an Azure LLM inference trace "
                                    "has TIMESTAMP,ContextTokens,GeneratedTokens)",
                                    name));
      continue;
    }
    const auto field = [&](const char* name) -> const std::string& {
      const auto i = column.at(name);
      if (i >= fields.size())
        throw bad_row(source, line, fmt::format("no '{}' field", name));
      return fields[i];
    };
    const auto when = datetime_seconds(field("TIMESTAMP"));
    if (!when)
      throw bad_row(
          source, line,
          fmt::format("TIMESTAMP '{}' is not a date and time like 2023-11-16 18:17:03.979", field("TIMESTAMP")));
    TraceRequest r;
    r.timestamp = *when;
    r.input_tokens = std::max<std::int64_t>(1, csv_length(field("ContextTokens"), "ContextTokens", source, line));
    r.output_tokens = std::max<std::int64_t>(1, csv_length(field("GeneratedTokens"), "GeneratedTokens", source, line));
    rows.push_back(std::move(r));
  }
  return rows;
}

} // namespace

TraceFormat
parse_trace_format(const std::string& name) {
  if (name == "auto")
    return TraceFormat::auto_detect;
  if (name == "jsonl")
    return TraceFormat::jsonl;
  if (name == "mooncake")
    return TraceFormat::mooncake;
  if (name == "azure")
    return TraceFormat::azure;
  throw InputError("--trace-format '" + name + "' is not auto, jsonl, mooncake or azure");
}

std::string
to_string(TraceFormat format) {
  switch (format) {
  case TraceFormat::auto_detect:
    return "auto";
  case TraceFormat::jsonl:
    return "jsonl";
  case TraceFormat::mooncake:
    return "mooncake";
  case TraceFormat::azure:
    return "azure";
  }
  return "?";
}

TraceFormat
detect_trace_format(const std::string& text) {
  const auto start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos)
    return TraceFormat::jsonl;
  const auto first = text.substr(start, text.find('\n', start) - start);
  if (first.starts_with("TIMESTAMP") || first.find(",TIMESTAMP") != std::string::npos)
    return TraceFormat::azure;
  const auto row = nlohmann::json::parse(first, nullptr, false);
  return row.is_object() && row.contains("hash_ids") ? TraceFormat::mooncake : TraceFormat::jsonl;
}

std::vector<TraceRequest>
parse_request_trace(const std::string& text, const std::string& source, TraceFormat format) {
  if (format == TraceFormat::auto_detect)
    format = detect_trace_format(text);
  auto rows = format == TraceFormat::azure ? parse_azure_csv(text, source)
                                           : parse_json_rows(text, source, format == TraceFormat::mooncake);
  if (rows.size() < 2)
    throw InputError(source + ": a trace needs at least two requests");
  return rows;
}

std::vector<TraceRequest>
load_request_trace(const std::filesystem::path& file, TraceFormat format) {
  return parse_request_trace(read_input_file(file), file.string(), format);
}

} // namespace optkit::bench
