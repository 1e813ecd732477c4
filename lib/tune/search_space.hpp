// A tuning search space (profiles/spaces/*.yaml or a user file): logical engine knobs, each an
// integer, float (either optionally log-scaled or stepped) or categorical parameter, optionally
// active only when another parameter has one of some values (`when: "speculation=on|auto"`).
// A configuration is a JSON object knob → value holding only the active parameters.
//
//   name: sim-continuous
//   description: batching and speculation of a continuous-batching engine
//   parameters:
//     - {name: max_num_seqs, type: int, low: 1, high: 64, log: true, default: 16}
//     - {name: speculation, type: categorical, choices: ["off", "on"]}
//     - {name: speculative_tokens, type: int, low: 1, high: 8, when: "speculation=on"}
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::tune {

enum class ParamKind { integer, real, categorical };

struct Parameter {
  std::string name;
  ParamKind kind = ParamKind::real;
  double low = 0, high = 1;
  std::optional<double> step; // integers: 1 unless given
  bool log = false;
  std::vector<std::string> choices;            // categorical
  std::optional<nlohmann::json> default_value; // the engine's own default (the baseline, hill-climb's start)
  std::optional<double> neighbor_step;         // hill-climb's step (log-scaled: a factor)
  std::string when_param;                      // empty: always active
  std::vector<std::string> when_values;        // active iff when_param's value (as text) is one of these

  // The value as the optimizers see it: log(x) never (that is the sampler's business), a
  // categorical's index, a number as is.
  double internal(const nlohmann::json& value) const;
  nlohmann::json external(double internal) const; // rounded to the grid, clipped, typed
  bool stepped() const { return kind == ParamKind::integer || step.has_value(); }
  double grid_step() const { return step.value_or(1.0); }
  // Grid points: every choice, every step between low and high, or `points` spread (log-spaced
  // when `log`) for a continuous float.
  std::vector<nlohmann::json> grid(std::size_t points) const;
  std::size_t grid_count(std::size_t points) const; // grid(points).size(), without building it
};

struct SearchSpace {
  std::string name;
  std::string description;
  std::string source;                // the file it came from
  std::vector<Parameter> parameters; // a conditional parameter comes after the one it depends on

  const Parameter* find(const std::string& name) const;
  bool active(const Parameter& parameter, const nlohmann::json& config) const;
  // A configuration's values checked against the space: unknown knobs, missing active ones,
  // values off the grid or out of range. InputError naming the knob.
  void check(const nlohmann::json& config) const;
  std::size_t grid_size(std::size_t float_points) const; // the full product, saturating
  // Every parameter at its default (conditionals as the defaults make them); nullopt when an
  // active parameter has none.
  std::optional<nlohmann::json> defaults() const;
  // `config` with inactive knobs removed and newly active ones set to their default (else the
  // middle of the range / the first choice), in parameter order.
  nlohmann::json complete(nlohmann::json config) const;
};

// Text of a value as `when` compares it: strings as is, integers without a decimal point.
std::string value_text(const nlohmann::json& value);

SearchSpace parse_search_space(const std::string& yaml, const std::string& source);
SearchSpace load_search_space(const std::filesystem::path& file);
// A bundled name (profiles/spaces/NAME.yaml) or a path.
SearchSpace resolve_search_space(const std::string& name_or_path);

} // namespace optkit::tune
