// Hand-built tokenizer.json documents the tokenizer tests share.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace optkit::test {

// SentencePiece-style BPE: Prepend + Replace normalizer, byte fallback, "▁hi" merges, a <s> template.
inline nlohmann::json
sentencepiece_json() {
  return {{"model",
           {{"type", "BPE"},
            {"byte_fallback", true},
            {"vocab", {{"<unk>", 0}, {"\u2581", 1}, {"h", 2}, {"i", 3}, {"hi", 4}, {"\u2581hi", 5}}},
            {"merges", {"h i", "\u2581 hi"}}}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "\u2581"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"start", 1}}}}}},
          {"added_tokens", {{{"id", 262}, {"content", "<s>"}, {"special", true}}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}}}}};
}

// The 256 <0xNN> byte-fallback tokens, ids 6…261.
inline nlohmann::json
with_byte_tokens(nlohmann::json j) {
  for (int b = 0; b < 256; ++b)
    j["model"]["vocab"][fmt::format("<0x{:02X}>", b)] = 6 + b;
  return j;
}

} // namespace optkit::test
