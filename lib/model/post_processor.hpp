// tokenizer.json's post_processor, for a single sequence: TemplateProcessing ("single"),
// BertProcessing and RobertaProcessing ([CLS] A [SEP] / <s> A </s>), ByteLevel (offsets only: no
// ids change) and Sequence of them, each adding its special tokens in turn.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optkit::model {

class PostProcessor {
public:
  // `find_token` resolves a special token's text to its id when the file gives only the text.
  using FindToken = std::function<std::optional<std::int32_t>(std::string_view)>;
  static PostProcessor from_json(const nlohmann::json& node, const std::string& source, const FindToken& find_token);
  // The template transformers builds for Llama/Gemma tokenizer classes from tokenizer_config.json's
  // add_bos_token / add_eos_token: [bos] A [eos] with each part present when asked for.
  static PostProcessor bos_eos(std::optional<std::int32_t> bos, std::optional<std::int32_t> eos);

  // Adds the special tokens to one encoded sequence.
  std::vector<std::int32_t> apply(std::vector<std::int32_t> ids) const;
  bool empty() const { return m_templates.empty(); }
  std::vector<std::string> component_names() const { return m_names; }

private:
  struct Piece {
    bool is_sequence = false;
    std::vector<std::int32_t> ids; // special token ids
  };
  std::vector<std::vector<Piece>> m_templates;
  std::vector<std::string> m_names;
};

} // namespace optkit::model
