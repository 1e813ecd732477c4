// Splits a Jinja template into tokens, with the whitespace rules Hugging Face chat templates are
// rendered under (trim_blocks, lstrip_blocks, "-" whitespace control, one trailing newline
// dropped). Every token carries its line and column for error messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace optkit::jinja {

struct Token {
  enum class Kind {
    text,
    open_expression,
    close_expression,
    open_statement,
    close_statement,
    name,
    string,
    integer,
    floating,
    symbol,
    end
  };
  Kind kind;
  std::string text;
  int line = 1, column = 1;
};

// Throws InputError "<name>:<line>:<col>: ..." on a malformed tag or literal.
// Jinja drops one trailing newline of the source unless keep_trailing_newline is set.
std::vector<Token> tokenize(std::string_view source, const std::string& name, bool keep_trailing_newline = false);

} // namespace optkit::jinja
