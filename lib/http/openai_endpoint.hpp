// What every optkit client of an OpenAI-compatible server needs before its first request: the
// server's base URL (a trailing /v1 dropped, so paths are the OpenAI ones) and the models it lists.
#pragma once

#include "http/client.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace optkit::http {

// parse_url, with a trailing "/v1" removed from the prefix.
Url openai_base_url(const std::string& text);

// The ids GET /v1/models lists (at least one). InputError for 401/403 (naming --api-key and
// OPENAI_API_KEY); RuntimeFailure, naming --endpoint, when the server is unreachable or lists none.
std::vector<std::string> listed_models(Client& client);

// The same listing whole: each /v1/models entry with an "id" (its root, max_model_len, ... as the
// server gives them). Same errors as listed_models.
std::vector<nlohmann::json> listed_model_entries(Client& client);

} // namespace optkit::http
