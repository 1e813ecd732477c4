// The syntax tree of a chat template: expressions and statements, each with its source position.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace optkit::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
  enum class Kind {
    literal_string,
    literal_integer,
    literal_float,
    literal_bool,
    literal_none,
    name,
    list,
    tuple,
    dict,
    attribute,
    subscript,
    slice,
    call,
    filter,
    test,
    unary,
    binary,
    ternary
  };
  Kind kind;
  int line = 0, column = 0;
  std::string text;                  // literal text, name, attribute, operator, filter or test name
  std::vector<ExprPtr> items;        // list/tuple items, dict keys and values interleaved, call/filter/test args
  std::vector<std::string> keywords; // names of the trailing keyword arguments (last keywords.size() of items)
  ExprPtr a, b, c;                   // operands: object/left/condition, index/right/true value, slice step/false value
  bool negated = false;              // "is not"
};

struct Stmt {
  enum class Kind { text, output, if_, for_, set, macro, call_block, break_, continue_, filter_block };
  Kind kind;
  int line = 0, column = 0;
  std::string text;                // raw text; macro name; filter name
  ExprPtr expr;                    // output, if condition, for iterable, set value, call expression
  ExprPtr target;                  // for / set target (name, tuple of names, or attribute)
  ExprPtr condition;               // for ... if condition
  std::vector<std::string> params; // macro parameters
  std::vector<ExprPtr> defaults;   // macro parameter defaults (null where none)
  Body body, otherwise;            // if: then / else (elif nests as an if in otherwise); for: body / else
};

} // namespace optkit::jinja
