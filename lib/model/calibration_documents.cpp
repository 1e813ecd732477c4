#include "model/calibration_documents.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <sstream>
#include <string>

namespace optkit::model {

namespace {

constexpr std::int64_t kMinDocumentTokens = 8;

std::vector<std::string>
paragraphs(const std::string& text) {
  std::vector<std::string> out;
  std::string current;
  std::istringstream in(text);
  std::string line;
  auto flush = [&] {
    if (current.find_first_not_of(" \t\n") != std::string::npos)
      out.push_back(current);
    current.clear();
  };
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush();
      continue;
    }
    if (!current.empty())
      current += '\n';
    current += line;
  }
  flush();
  return out;
}

std::vector<std::string>
jsonl_documents(const std::string& text, const std::filesystem::path& file, const std::filesystem::path& model_dir) {
  std::vector<std::string> out;
  std::optional<ChatTemplate> chat;
  std::istringstream in(text);
  std::string line;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const auto where = fmt::format("{}:{}", file.string(), number);
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(fmt::format("{}: not JSON ({})", where, e.what()));
    }
    if (row.is_object() && row.contains("text") && row.at("text").is_string()) {
      out.push_back(row.at("text").get<std::string>());
    } else if (row.is_object() && row.contains("messages") && row.at("messages").is_array()) {
      if (!chat)
        chat = load_chat_template(model_dir);
      std::vector<ChatMessage> messages;
      for (const auto& m : row.at("messages")) {
        if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m.at("role").is_string() ||
            !m.at("content").is_string())
          throw InputError(fmt::format("{}: each message needs string 'role' and 'content'", where));
        messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
      }
      out.push_back(render_chat(*chat, messages, false));
    } else {
      throw InputError(fmt::format("{}: a calibration row needs a string 'text' or a 'messages' list", where));
    }
  }
  return out;
}

std::string
read_calibration_text(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file))
    throw InputError(fmt::format("--calib {}: no such file", file.string()));
  return read_input_file(file, "calibration data");
}

} // namespace

bool
is_jsonl_calibration(const std::filesystem::path& file) {
  return file.extension() == ".jsonl" || file.extension() == ".json";
}

std::vector<std::vector<std::int32_t>>
read_calibration_documents(const std::filesystem::path& file, const std::filesystem::path& model_dir,
                           std::int64_t sequence_length) {
  const auto text = read_calibration_text(file);
  const auto texts = is_jsonl_calibration(file) ? jsonl_documents(text, file, model_dir) : paragraphs(text);
  const auto tokenizer = model::Tokenizer::load_folder(model_dir);
  std::vector<std::vector<std::int32_t>> docs;
  for (const auto& t : texts) {
    auto ids = tokenizer.encode(t, true);
    if (static_cast<std::int64_t>(ids.size()) < kMinDocumentTokens)
      continue;
    if (static_cast<std::int64_t>(ids.size()) > sequence_length)
      ids.resize(static_cast<std::size_t>(sequence_length));
    docs.push_back(std::move(ids));
  }
  if (docs.empty())
    throw InputError(fmt::format("--calib {}: no document of at least {} tokens (the file is empty or has only short "
                                 "lines; paragraphs are separated by blank lines)",
                                 file.string(), kMinDocumentTokens));
  return docs;
}

std::vector<std::int32_t>
read_calibration_stream(const std::filesystem::path& file, const std::filesystem::path& model_dir) {
  auto text = read_calibration_text(file);
  if (!text.empty() && text.back() == '\n')
    text.pop_back();
  auto tokens = model::Tokenizer::load_folder(model_dir).encode(text, true);
  if (static_cast<std::int64_t>(tokens.size()) < kMinDocumentTokens)
    throw InputError(fmt::format("--calib {}: {} tokens; calibration needs at least {} (pass a longer text)",
                                 file.string(), tokens.size(), kMinDocumentTokens));
  return tokens;
}

} // namespace optkit::model
