#include "engines/effective_settings.hpp"

#include <optional>
#include <string>

namespace optkit::engines {

nlohmann::json
effective_from_version(const nlohmann::json& version_body) {
  if (version_body.is_object() && version_body.contains("engine") && version_body["engine"].is_object())
    return version_body["engine"];
  return nullptr;
}

nlohmann::json
llamacpp_version(const nlohmann::json& props) {
  if (props.is_object() && props.contains("build_info") && props["build_info"].is_string())
    return props["build_info"];
  return nullptr;
}

nlohmann::json
effective_from_props(const nlohmann::json& props) {
  if (!props.is_object())
    return nullptr;
  nlohmann::json out = nlohmann::json::object();
  if (props.contains("total_slots") && props["total_slots"].is_number_integer())
    out["total_slots"] = props["total_slots"];
  if (const auto settings = props.find("default_generation_settings");
      settings != props.end() && settings->is_object() && settings->contains("n_ctx") &&
      (*settings)["n_ctx"].is_number_integer())
    out["n_ctx"] = (*settings)["n_ctx"];
  return out.empty() ? nlohmann::json(nullptr) : out;
}

namespace {

// Labels of one sample, `{a="x",b="y\"z"}` starting at text[0] == '{'; nullopt when malformed.
std::optional<nlohmann::json>
parse_labels(std::string_view text) {
  nlohmann::json labels = nlohmann::json::object();
  std::size_t i = 1;
  const auto skip_blanks = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t'))
      ++i;
  };
  for (;;) {
    skip_blanks();
    if (i >= text.size())
      return std::nullopt;
    if (text[i] == '}')
      return labels;
    const std::size_t name_begin = i;
    while (i < text.size() && text[i] != '=' && text[i] != '}' && text[i] != ',' && text[i] != ' ')
      ++i;
    const std::string name(text.substr(name_begin, i - name_begin));
    skip_blanks();
    if (name.empty() || i >= text.size() || text[i] != '=')
      return std::nullopt;
    ++i;
    skip_blanks();
    if (i >= text.size() || text[i] != '"')
      return std::nullopt;
    ++i;
    std::string value;
    for (;; ++i) {
      if (i >= text.size())
        return std::nullopt;
      if (text[i] == '"')
        break;
      if (text[i] == '\\') {
        if (++i >= text.size())
          return std::nullopt;
        value += text[i] == 'n' ? '\n' : text[i];
      } else {
        value += text[i];
      }
    }
    ++i; // the closing quote
    labels[name] = value;
    skip_blanks();
    if (i < text.size() && text[i] == ',')
      ++i;
  }
}

} // namespace

nlohmann::json
config_info_labels(std::string_view prometheus_text) {
  constexpr std::string_view suffix = "_config_info";
  nlohmann::json out = nlohmann::json::object();
  while (!prometheus_text.empty()) {
    const auto end = prometheus_text.find('\n');
    const std::string_view line = prometheus_text.substr(0, end);
    prometheus_text = end == std::string_view::npos ? std::string_view{} : prometheus_text.substr(end + 1);
    if (line.empty() || line.front() == '#')
      continue;
    const auto brace = line.find('{');
    if (brace == std::string_view::npos || brace < suffix.size())
      continue;
    const std::string_view name = line.substr(0, brace);
    if (name.substr(name.size() - suffix.size()) != suffix)
      continue;
    if (auto labels = parse_labels(line.substr(brace)))
      out[std::string(name)] = std::move(*labels);
  }
  return out;
}

} // namespace optkit::engines
