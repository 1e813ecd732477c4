#include "http/json_body.hpp"

#include <fmt/format.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optkit::http {

namespace {

using json = nlohmann::ordered_json;

// nlohmann's SAX interface, building the value: each open object or array on a stack, as a list
// of members (with a key -> position index) or items, made a value when it closes. Values are
// moved, never copied, so JSON_DIAGNOSTICS' pointer from each value to its container stays true.
class BodyBuilder {
public:
  explicit BodyBuilder(const JsonBodyLimits& limits) : m_limits(limits) {}

  bool null() { return add(json(nullptr)); }
  bool boolean(bool v) { return add(json(v)); }
  bool number_integer(json::number_integer_t v) { return add(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return add(json(v)); }
  bool number_float(json::number_float_t v, const std::string&) { return add(json(v)); }
  bool string(std::string& v) { return add(json(std::move(v))); }
  bool binary(json::binary_t&) { return fail("binary values are not JSON"); }

  bool start_object(std::size_t) { return open(true); }
  bool key(std::string& k) {
    Open& top = m_open.back();
    if (!top.index.contains(k) && top.members.size() >= m_limits.max_keys_per_object)
      return fail(fmt::format("an object has more than {} keys", m_limits.max_keys_per_object));
    top.key = std::move(k);
    return true;
  }
  bool end_object() {
    Open& top = m_open.back();
    json::object_t members;
    members.reserve(top.members.size());
    for (auto& [k, v] : top.members)
      members.emplace_back(std::move(k), std::move(v)); // the vector's append, not ordered_map's search
    m_open.pop_back();
    return add(json(std::move(members)));
  }
  bool start_array(std::size_t) { return open(false); }
  bool end_array() {
    json::array_t items = std::move(m_open.back().items);
    m_open.pop_back();
    return add(json(std::move(items)));
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) { return fail(e.what()); }

  json take() { return std::move(m_root); }
  const std::string& error() const { return m_error; }

private:
  struct Open {
    bool object = false;
    std::vector<std::pair<std::string, json>> members;  // an object's, in the order first given
    std::unordered_map<std::string, std::size_t> index; // key -> position in members
    std::string key;                                    // the key just read
    std::vector<json> items;                            // an array's
  };

  // A finished value goes to the root, the open object's pending key (a repeated key keeps its
  // first place and takes the last value) or the open array's end.
  bool add(json value) {
    if (m_open.empty()) {
      m_root = std::move(value);
      return true;
    }
    Open& top = m_open.back();
    if (!top.object) {
      top.items.push_back(std::move(value));
      return true;
    }
    const auto [at, fresh] = top.index.try_emplace(top.key, top.members.size());
    if (fresh)
      top.members.emplace_back(std::move(top.key), std::move(value));
    else
      top.members[at->second].second = std::move(value);
    return true;
  }

  bool open(bool object) {
    if (m_open.size() >= m_limits.max_depth)
      return fail(fmt::format("objects and arrays nest deeper than {} levels", m_limits.max_depth));
    m_open.push_back({});
    m_open.back().object = object;
    return true;
  }

  bool fail(std::string message) {
    m_error = std::move(message);
    return false;
  }

  const JsonBodyLimits& m_limits;
  json m_root;
  std::vector<Open> m_open;
  std::string m_error;
};

} // namespace

nlohmann::ordered_json
parse_json_body(std::string_view text, const JsonBodyLimits& limits) {
  BodyBuilder builder(limits);
  if (!json::sax_parse(text, &builder, json::input_format_t::json, true))
    throw JsonBodyError(builder.error());
  return builder.take();
}

} // namespace optkit::http
