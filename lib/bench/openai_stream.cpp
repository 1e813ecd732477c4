#include "bench/openai_stream.hpp"

#include "core/error.hpp"

#include <nlohmann/json.hpp>

namespace optkit::bench {

namespace {

// The output text a chunk carries: choices[0].text (completions) or choices[0].delta.content
// (chat); reasoning_content counts as output too (reasoning models stream it first).
bool
carries_text(const nlohmann::json& choice) {
  const auto non_empty = [](const nlohmann::json& object, const char* key) {
    const auto it = object.find(key);
    return it != object.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
  };
  if (non_empty(choice, "text"))
    return true;
  const auto delta = choice.find("delta");
  return delta != choice.end() && delta->is_object() &&
         (non_empty(*delta, "content") || non_empty(*delta, "reasoning_content"));
}

// Appends the answer text a chunk carries (completions' text, chat's delta.content) to `text`.
void
append_content(const nlohmann::json& choice, std::string& text) {
  if (const auto it = choice.find("text"); it != choice.end() && it->is_string())
    text += it->get_ref<const std::string&>();
  if (const auto delta = choice.find("delta"); delta != choice.end() && delta->is_object())
    if (const auto it = delta->find("content"); it != delta->end() && it->is_string())
      text += it->get_ref<const std::string&>();
}

} // namespace

bool
OpenAiStreamReader::feed(std::string_view bytes, double now) {
  if (!m_error.empty())
    return false;
  try {
    m_parser.feed(bytes, [&](const http::SseEvent& event) { on_event(event, now); });
  } catch (const Error& e) {
    if (m_error.empty())
      m_error = std::string("malformed event stream: ") + e.what();
  }
  return m_error.empty();
}

void
OpenAiStreamReader::on_event(const http::SseEvent& event, double now) {
  if (!m_error.empty())
    return;
  if (m_done) {
    m_error = "data after [DONE]";
    return;
  }
  if (event.data == "[DONE]") {
    m_done = true;
    return;
  }
  const auto chunk = nlohmann::json::parse(event.data, nullptr, false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    m_error = "a streamed chunk is not a JSON object";
    return;
  }
  if (const auto error = chunk.find("error"); error != chunk.end()) {
    const auto message = error->is_object() ? error->value("message", std::string()) : std::string();
    m_error = "the server reported an error mid-stream" + (message.empty() ? std::string() : ": " + message);
    return;
  }
  if (const auto choices = chunk.find("choices"); choices != chunk.end() && choices->is_array()) {
    for (const auto& choice : *choices) {
      if (!choice.is_object())
        continue;
      if (m_keep_text)
        append_content(choice, m_text);
      if (carries_text(choice)) {
        if (m_first_text < 0)
          m_first_text = now;
        m_chunk_times.push_back(now);
        break;
      }
    }
    for (const auto& choice : *choices)
      if (choice.is_object())
        if (const auto reason = choice.find("finish_reason"); reason != choice.end() && reason->is_string())
          m_finish_reason = reason->get<std::string>();
  }
  if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    const auto count = [&](const char* key) -> std::int64_t {
      const auto it = usage->find(key);
      return it != usage->end() && it->is_number_integer() ? it->get<std::int64_t>() : -1;
    };
    const auto prompt = count("prompt_tokens");
    const auto completion = count("completion_tokens");
    if (prompt >= 0 && completion >= 0) {
      m_has_usage = true;
      m_prompt_tokens = prompt;
      m_completion_tokens = completion;
    }
  }
  // optkit serve-deltas reports its own timing per request; vLLM and others do not.
  if (const auto timing = chunk.find("timing"); timing != chunk.end() && timing->is_object())
    if (const auto arrival = timing->find("arrival"), scheduled = timing->find("scheduled");
        arrival != timing->end() && scheduled != timing->end() && arrival->is_number() && scheduled->is_number())
      m_server_queue_s = scheduled->get<double>() - arrival->get<double>();
}

} // namespace optkit::bench
