// Parses the Jinja subset Hugging Face chat templates use into a syntax tree: for (with a filter
// condition and else), if/elif/else, set (also of a namespace attribute, and block set), macro,
// call blocks, filter blocks, break/continue; expressions with Python precedence, filters, tests,
// slicing, calls with keyword arguments, list/tuple/dict literals. A construct outside the subset is
// an InputError naming the template's line and column. Nesting is bounded (hostile templates).
#pragma once

#include "jinja/ast.hpp"
#include "jinja/lexer.hpp"

namespace optkit::jinja {

Body parse(const std::vector<Token>& tokens, const std::string& name);

} // namespace optkit::jinja
