#include "http/json_body.hpp"

#include <fmt/format.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optkit::http {

namespace {

using json = nlohmann::ordered_json;

// nlohmann's SAX interface, building the value: each open object or array on a stack, with a
// key -> position index per object.
class BodyBuilder {
public:
  explicit BodyBuilder(const JsonBodyLimits& limits) : m_limits(limits) {}

  bool null() { return add(nullptr); }
  bool boolean(bool v) { return add(v); }
  bool number_integer(json::number_integer_t v) { return add(v); }
  bool number_unsigned(json::number_unsigned_t v) { return add(v); }
  bool number_float(json::number_float_t v, const std::string&) { return add(v); }
  bool string(std::string& v) { return add(std::move(v)); }
  bool binary(json::binary_t&) { return fail("binary values are not JSON"); }

  bool start_object(std::size_t) { return open(json::object()); }
  bool key(std::string& k) {
    Open& top = m_open.back();
    auto& object = top.value->get_ref<json::object_t&>();
    const auto [at, fresh] = top.index.try_emplace(k, object.size());
    if (fresh) {
      if (object.size() >= m_limits.max_keys_per_object)
        return fail(fmt::format("an object has more than {} keys", m_limits.max_keys_per_object));
      object.emplace_back(std::move(k), nullptr); // the vector's append, not ordered_map's search
    }
    top.slot = &(object.begin() + static_cast<std::ptrdiff_t>(at->second))->second;
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_array() { return close(); }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) { return fail(e.what()); }

  json take() { return std::move(m_root); }
  const std::string& error() const { return m_error; }

private:
  struct Open {
    json* value;
    json* slot = nullptr; // an object's value for the key just read
    std::unordered_map<std::string, std::size_t> index;
  };

  // Where the next value goes: the root, the object's pending key, or the array's end.
  json* place() {
    if (m_open.empty())
      return &m_root;
    Open& top = m_open.back();
    if (top.value->is_object())
      return std::exchange(top.slot, nullptr);
    auto& array = top.value->get_ref<json::array_t&>();
    array.emplace_back();
    return &array.back();
  }

  template <class Value> bool add(Value&& v) {
    *place() = json(std::forward<Value>(v));
    return true;
  }

  bool open(json empty) {
    if (m_open.size() >= m_limits.max_depth)
      return fail(fmt::format("objects and arrays nest deeper than {} levels", m_limits.max_depth));
    json* at = place();
    *at = std::move(empty);
    m_open.push_back({at});
    return true;
  }

  bool close() {
    m_open.pop_back();
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
