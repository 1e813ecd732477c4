#include "http/openai_endpoint.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace optkit::http {

Url
openai_base_url(const std::string& text) {
  auto url = parse_url(text);
  if (url.prefix.size() >= 3 && url.prefix.substr(url.prefix.size() - 3) == "/v1")
    url.prefix.resize(url.prefix.size() - 3);
  return url;
}

std::vector<nlohmann::json>
listed_model_entries(Client& client) {
  Response response;
  try {
    response = client.request("GET", "/v1/models");
  } catch (const RuntimeFailure& e) {
    throw RuntimeFailure(std::string("--endpoint: ") + e.what());
  }
  if (response.status == 401 || response.status == 403)
    throw InputError(fmt::format("--endpoint {}: HTTP {} on /v1/models — give the server's key with --api-key or "
                                 "OPENAI_API_KEY",
                                 client.url().text, response.status));
  if (response.status != 200)
    throw RuntimeFailure(
        fmt::format("--endpoint {}: GET /v1/models answered HTTP {}", client.url().text, response.status));
  const auto body = nlohmann::json::parse(response.body, nullptr, false);
  std::vector<nlohmann::json> entries;
  if (!body.is_discarded() && body.is_object() && body.contains("data") && body["data"].is_array())
    for (const auto& entry : body["data"])
      if (entry.is_object() && entry.contains("id") && entry["id"].is_string())
        entries.push_back(entry);
  if (entries.empty())
    throw RuntimeFailure(fmt::format("--endpoint {}: /v1/models lists no model", client.url().text));
  return entries;
}

std::vector<std::string>
listed_models(Client& client) {
  std::vector<std::string> names;
  for (const auto& entry : listed_model_entries(client))
    names.push_back(entry["id"].get<std::string>());
  return names;
}

} // namespace optkit::http
