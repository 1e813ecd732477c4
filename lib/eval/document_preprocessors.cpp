#include "eval/document_preprocessors.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <cctype>

namespace optkit::eval {

namespace {

std::string
replace_all(std::string text, const std::string& from, const std::string& to) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size())
    out += text.substr(at, hit - at) + to;
  return out + text.substr(at);
}

// Python's re.sub(r"\[.*?\]", "", text): each "[" up to the nearest "]" after it goes, unless a
// newline comes first ("." does not match one); an unclosed "[" stays.
std::string
remove_bracketed(const std::string& text) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto open = text.find('[', at);
    if (open == std::string::npos)
      return out + text.substr(at);
    const auto end = text.find_first_of("]\n", open + 1);
    if (end == std::string::npos || text[end] == '\n') {
      out += text.substr(at, open + 1 - at); // this "[" matches nothing: kept
      at = open + 1;
      continue;
    }
    out += text.substr(at, open - at);
    at = end + 1;
  }
  return out;
}

// Python's str.capitalize() on ASCII letters: the first upper-cased, the rest lower-cased.
std::string
capitalize(std::string text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    text[i] = static_cast<char>(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return text;
}

std::string
string_field(const Document& doc, const std::string& field) {
  const auto it = doc.find(field);
  if (it == doc.end() || !it->is_string())
    throw InputError("process_docs: the document needs a string field '" + field + "'");
  return it->get<std::string>();
}

Document
hellaswag_document(const Document& doc) {
  Document out = doc;
  const std::string ctx = string_field(doc, "ctx_a") + " " + capitalize(string_field(doc, "ctx_b"));
  out["query"] = hellaswag_clean(string_field(doc, "activity_label") + ": " + ctx);
  const auto endings = doc.find("endings");
  if (endings == doc.end() || !endings->is_array())
    throw InputError("process_docs: the document needs a list field 'endings'");
  out["choices"] = nlohmann::ordered_json::array();
  for (const auto& e : *endings) {
    if (!e.is_string())
      throw InputError("process_docs: 'endings' must hold strings");
    out["choices"].push_back(hellaswag_clean(e.get<std::string>()));
  }
  const auto label = doc.find("label");
  if (label != doc.end() && label->is_number_integer())
    out["gold"] = label->get<int>();
  else if (label != doc.end() && label->is_string() && is_index_text(label->get<std::string>()))
    out["gold"] = std::stoi(label->get<std::string>());
  return out;
}

} // namespace

std::string
hellaswag_clean(std::string text) {
  text = std::string(strip_chars(text));
  text = replace_all(text, " [title]", ". ");
  text = remove_bracketed(text);
  return replace_all(text, "  ", " ");
}

Document
preprocess_document(const std::string& preprocessor, const Document& doc) {
  if (preprocessor.empty())
    return doc;
  if (preprocessor == "hellaswag")
    return hellaswag_document(doc);
  throw InputError("process_docs: unknown preprocessor '" + preprocessor + "' (hellaswag)");
}

} // namespace optkit::eval
