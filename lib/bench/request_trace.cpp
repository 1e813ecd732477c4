#include "bench/request_trace.hpp"

#include "bench/json_lines.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

namespace optkit::bench {

std::vector<TraceRequest>
parse_request_trace(const std::string& text, const std::string& source) {
  std::vector<TraceRequest> rows;
  for_each_json_line(text, source, R"({"timestamp": SECONDS, "input_tokens": N, "output_tokens": N})",
                     [&](const nlohmann::json& row, std::size_t line) {
                       const auto bad = [&](const std::string& why) {
                         return InputError(fmt::format("{}:{}: {}", source, line, why));
                       };
                       TraceRequest r;
                       const auto t = row.find("timestamp");
                       if (t == row.end() || !t->is_number() || !std::isfinite(t->get<double>()))
                         throw bad("'timestamp' (seconds) is missing or not a number");
                       r.timestamp = t->get<double>();
                       const auto length = [&](const char* name, const char* alias) -> std::int64_t {
                         auto it = row.find(name);
                         if (it == row.end())
                           it = row.find(alias);
                         if (it == row.end())
                           return 0;
                         if (!it->is_number_integer() || it->get<std::int64_t>() < 1 ||
                             it->get<std::int64_t>() > (1 << 24))
                           throw bad(fmt::format("'{}' is not a token count in 1..16777216", it.key()));
                         return it->get<std::int64_t>();
                       };
                       r.input_tokens = length("input_tokens", "input_length");
                       r.output_tokens = length("output_tokens", "output_length");
                       rows.push_back(r);
                     });
  if (rows.size() < 2)
    throw InputError(source + ": a trace needs at least two requests");
  return rows;
}

std::vector<TraceRequest>
load_request_trace(const std::filesystem::path& file) {
  return parse_request_trace(read_input_file(file), file.string());
}

} // namespace optkit::bench
