// The document preprocessing lm-eval's multiple-choice tasks ship as Python (`process_docs`), for
// the suites whose prompts a Jinja template cannot build: HellaSwag's WikiHow clean-up.
#pragma once

#include "eval/task_documents.hpp"

#include <string>

namespace optkit::eval {

// lm-eval hellaswag/utils.py preprocess(): strip; " [title]" → ". "; every "[...]" removed
// (non-greedy); double spaces collapsed once.
std::string hellaswag_clean(std::string text);

// The document with the fields `preprocessor` adds: "hellaswag" adds query (activity_label + ": " +
// ctx_a + " " + ctx_b capitalized, cleaned), choices (the cleaned endings) and gold (label as an
// int). InputError naming the missing or mistyped field.
Document preprocess_document(const std::string& preprocessor, const Document& doc);

} // namespace optkit::eval
