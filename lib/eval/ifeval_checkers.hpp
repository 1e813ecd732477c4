// IFEval's 25 instruction checkers as lm-eval runs them (google-research instructions.py):
// each instruction id with its kwargs judges one response; strict is the response as given
// (non-empty after strip), loose passes if any of eight variants passes (without '*', without the
// first and/or last line). Prompt level: all of a prompt's instructions followed.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace optkit::eval {

// Every id this implements, in IFEval's registry order.
const std::vector<std::string>& ifeval_instruction_ids();

// Whether `response` follows instruction `id` with `kwargs` (None-valued entries already dropped);
// `prompt` is the document's prompt (combination:repeat_prompt compares against its kwarg).
// InputError naming the id for an unknown instruction, or a missing or invalid kwarg (IFEval
// would draw a random value for a missing one; that would make a score irreproducible).
bool check_instruction(const std::string& id, const nlohmann::json& kwargs, const std::string& response);

struct IfevalScore {
  bool prompt_strict = false, prompt_loose = false;
  std::vector<bool> strict, loose; // per instruction, in the document's order
};

// One IFEval document (key, prompt, instruction_id_list, kwargs) and the model's response.
IfevalScore score_ifeval(const nlohmann::ordered_json& doc, const std::string& response);

// The eight loose variants of a response, in IFEval's order.
std::vector<std::string> loose_variants(const std::string& response);

} // namespace optkit::eval
