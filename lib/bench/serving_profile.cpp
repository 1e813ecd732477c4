#include "bench/serving_profile.hpp"

#include "bench/json_lines.hpp"
#include "bench/slo.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/random_source.hpp"
#include "core/resource_paths.hpp"
#include "core/yaml_schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace optkit::bench {

namespace {

using config::Field;
using config::Schema;
using config::Type;

Field
number_field(std::string name, std::string help, double minimum) {
  Field field{std::move(name), Type::number, false, std::move(help)};
  field.minimum = minimum;
  return field;
}

Field
length_field(std::string name, std::string help, bool required) {
  Schema schema{"length distribution",
                {Field{"distribution",
                       Type::string,
                       true,
                       "fixed | uniform | normal | lognormal | empirical",
                       {"fixed", "uniform", "normal", "lognormal", "empirical"}},
                 number_field("mean", "mean tokens (fixed: the length)", 1),
                 number_field("stddev", "standard deviation, tokens (normal, lognormal)", 0),
                 number_field("min", "smallest length drawn (default 1)", 1),
                 number_field("max", "largest length drawn (uniform: required)", 1),
                 [] {
                   Field values{"values", Type::list, false, "empirical: the lengths to draw from"};
                   Field item{"value", Type::integer, true, "a length in tokens"};
                   item.minimum = 1;
                   values.item = std::make_shared<const Field>(item);
                   return values;
                 }(),
                 Field{"file", Type::string, false, "empirical: a JSONL file, relative to the profile"},
                 Field{"field", Type::string, false, "empirical: the JSONL field holding the length"}}};
  Field field{std::move(name), Type::object, required, std::move(help)};
  field.object = std::make_shared<const Schema>(std::move(schema));
  return field;
}

Field
conversation_field() {
  Field conversation{"conversation", Type::object, false,
                     "multi-turn chat (api: chat): turns per conversation and the user's think time"};
  conversation.object = std::make_shared<const Schema>(Schema{
      "conversation",
      {length_field("turns", "requests per conversation (a length distribution)", true),
       number_field("think_time_s", "seconds between an answer's arrival and the next question (default 0)", 0)}});
  return conversation;
}

Field
slo_field() {
  Field slo{"slo", Type::list, false, "default SLOs when --slo is not given"};
  slo.item = std::make_shared<const Field>(Field{"slo", Type::string, true, "e.g. ttft:p95<=500ms"});
  return slo;
}

Field
load_field() {
  Field load{"load", Type::object, false, "the load it was planned for"};
  Field concurrency{"concurrency", Type::integer, false, "concurrent requests"};
  concurrency.minimum = 1;
  load.object = std::make_shared<const Schema>(
      Schema{"load", {concurrency, number_field("request_rate", "req/s: the search's first rate", 0)}});
  return load;
}

Field
predicted_field() {
  Field predicted{"predicted", Type::object, false, "optkit plan's prediction (information)"};
  predicted.object = std::make_shared<const Schema>(
      Schema{"predicted",
             {Field{"configuration", Type::string, false, "the configuration planned"},
              number_field("ttft_ms", "predicted TTFT", 0), number_field("tpot_ms", "predicted TPOT", 0),
              number_field("tokens_per_s_per_user", "predicted speed per user", 0),
              number_field("tokens_per_s_per_gpu", "predicted throughput per GPU", 0),
              Field{"sources", Type::string, false, "where the prediction's timings came from"}}});
  return predicted;
}

const Schema&
profile_schema() {
  static const Schema schema = [] {
    Schema mix_item{"request class",
                    {Field{"name", Type::string, false, "label in reports"},
                     number_field("weight", "relative share of requests (default 1)", 0),
                     length_field("input_tokens", "prompt length distribution", true),
                     length_field("output_tokens", "output length distribution", true)}};
    Field mix{"mix", Type::list, false, "weighted request classes (instead of top-level lengths)"};
    Field mix_entry{"class", Type::object, true, "one request class"};
    mix_entry.object = std::make_shared<const Schema>(mix_item);
    mix.item = std::make_shared<const Field>(mix_entry);
    Field prefix{"shared_prefix_tokens", Type::integer, false, "tokens every prompt starts with"};
    prefix.minimum = 0;
    Field prefix_groups{"shared_prefix_groups", Type::integer, false,
                        "distinct shared prefixes, each request starting with one of them (default 1)"};
    prefix_groups.minimum = 1;
    Field cancel_fraction = number_field("cancel_fraction", "share of requests the client abandons (default 0)", 0);
    cancel_fraction.maximum = 1;
    return Schema{
        "serving profile",
        {Field{"name", Type::string, true, "profile name"},
         Field{"description", Type::string, false, "one line for people"},
         Field{"api", Type::string, false, "completions | chat (default completions)", {"completions", "chat"}},
         length_field("input_tokens", "prompt length distribution", false),
         length_field("output_tokens", "output length distribution", false), mix, prefix, prefix_groups,
         cancel_fraction,
         number_field("cancel_after_s", "seconds after sending that an abandoned request is dropped (default 1)", 0),
         Field{"ignore_eos", Type::boolean, false, "force output lengths (default true)"},
         number_field("temperature", "sampling temperature (default 0)", 0),
         Field{"arrival",
               Type::string,
               false,
               "poisson | gamma | constant (default poisson)",
               {"poisson", "gamma", "constant"}},
         number_field("burstiness", "gamma shape: 1 Poisson, <1 burstier (default 1)", 0.01), conversation_field(),
         Field{"model", Type::string, false, "the model the profile was planned for (information)"}, slo_field(),
         load_field(), predicted_field()}};
  }();
  return schema;
}

LengthShape
shape_named(const std::string& name) {
  if (name == "uniform")
    return LengthShape::uniform;
  if (name == "normal")
    return LengthShape::normal;
  if (name == "lognormal")
    return LengthShape::lognormal;
  if (name == "empirical")
    return LengthShape::empirical;
  return LengthShape::fixed;
}

std::vector<std::int64_t>
read_jsonl_lengths(const std::filesystem::path& file, const std::string& field) {
  std::vector<std::int64_t> values;
  for_each_json_line(
      read_input_file(file), file.string(), fmt::format("{{\"{}\": TOKENS}}", field),
      [&](const nlohmann::json& row, std::size_t line) {
        const auto it = row.find(field);
        if (it == row.end() || !it->is_number_integer() || it->get<std::int64_t>() < 1)
          throw InputError(fmt::format("{}:{}: '{}' is missing or not a positive integer", file.string(), line, field));
        values.push_back(it->get<std::int64_t>());
      });
  if (values.empty())
    throw InputError(fmt::format("{}: no lengths in the file", file.string()));
  return values;
}

// A length parameter in tokens, between 0 and kMaxLengthTokens (checked before a bound becomes an
// integer, which a larger double cannot, and before a mean is sampled around).
constexpr double kMaxLengthTokens = 1e9;

double
length_parameter(const nlohmann::json& node, const char* key, double fallback, const std::string& where) {
  const double v = node.value(key, fallback);
  if (!(v >= 0 && v <= kMaxLengthTokens))
    throw InputError(fmt::format("{}: '{}' must be between 0 and {:.0f} tokens", where, key, kMaxLengthTokens));
  return v;
}

LengthDistribution
length_from(const nlohmann::json& node, const std::string& where, const std::filesystem::path& base_dir) {
  LengthDistribution d;
  d.shape = shape_named(node.at("distribution").get<std::string>());
  d.mean = length_parameter(node, "mean", 0.0, where);
  d.stddev = length_parameter(node, "stddev", 0.0, where);
  d.min = static_cast<std::int64_t>(length_parameter(node, "min", 1.0, where));
  d.max = static_cast<std::int64_t>(length_parameter(node, "max", 0.0, where));
  const auto bad = [&](const std::string& why) { return InputError(where + ": " + why); };
  switch (d.shape) {
  case LengthShape::fixed:
    if (!(d.mean >= 1))
      throw bad("a fixed length needs mean >= 1");
    break;
  case LengthShape::uniform:
    if (d.max < d.min || !node.contains("max"))
      throw bad("a uniform length needs min <= max");
    break;
  case LengthShape::normal:
  case LengthShape::lognormal:
    if (!(d.mean >= 1))
      throw bad("a normal or lognormal length needs mean >= 1 and stddev");
    break;
  case LengthShape::empirical:
    if (node.contains("values")) {
      d.values = node.at("values").get<std::vector<std::int64_t>>();
    } else if (node.contains("file")) {
      std::filesystem::path file = node.at("file").get<std::string>();
      if (file.is_relative())
        file = base_dir / file;
      d.values = read_jsonl_lengths(file, node.value("field", std::string("length")));
    }
    if (d.values.empty())
      throw bad("an empirical length needs values: [...] or file: FILE");
    break;
  }
  if (d.max != 0 && d.max < d.min)
    throw bad("max is below min");
  return d;
}

} // namespace

std::string
to_string(Api api) {
  return api == Api::chat ? "chat" : "completions";
}

ServingProfile
parse_serving_profile(const std::string& yaml_text, const std::string& source, const std::filesystem::path& base_dir) {
  const auto doc = config::parse_yaml(yaml_text, source, profile_schema());
  ServingProfile p;
  p.resolved = doc;
  p.name = doc.at("name").get<std::string>();
  p.description = doc.value("description", std::string());
  p.api = doc.value("api", std::string("completions")) == "chat" ? Api::chat : Api::completions;
  p.shared_prefix_tokens = doc.value("shared_prefix_tokens", std::int64_t{0});
  p.shared_prefix_groups = doc.value("shared_prefix_groups", std::int64_t{1});
  p.cancel_fraction = doc.value("cancel_fraction", 0.0);
  p.cancel_after_s = doc.value("cancel_after_s", 1.0);
  if (p.shared_prefix_groups > 1 && p.shared_prefix_tokens == 0)
    throw InputError(source + ": shared_prefix_groups needs shared_prefix_tokens (how long each shared prefix is)");
  if (p.shared_prefix_groups > 4096)
    throw InputError(source + ": shared_prefix_groups " + std::to_string(p.shared_prefix_groups) +
                     " is over 4096; a trace (bench --trace, Mooncake's hash_ids) describes reuse at that scale");
  p.ignore_eos = doc.value("ignore_eos", true);
  p.temperature = doc.value("temperature", 0.0);
  p.arrival = parse_arrival_process(doc.value("arrival", std::string("poisson")));
  p.burstiness = doc.value("burstiness", 1.0);
  if (doc.contains("slo"))
    for (const auto& text : doc.at("slo")) {
      try {
        p.slos.push_back(parse_slo(text.get<std::string>()));
      } catch (const InputError& e) {
        throw InputError(source + ": slo: " + e.what());
      }
    }
  if (doc.contains("load"))
    p.planned_rate = doc.at("load").value("request_rate", 0.0);
  if (doc.contains("conversation")) {
    const auto& conversation = doc.at("conversation");
    if (p.api != Api::chat)
      throw InputError(source + ": conversation: needs api: chat (a turn's history is sent as chat messages)");
    p.turns = length_from(conversation.at("turns"), source + ": conversation.turns", base_dir);
    p.think_time_s = conversation.value("think_time_s", 0.0);
  }
  if (doc.contains("mix")) {
    if (doc.contains("input_tokens") || doc.contains("output_tokens"))
      throw InputError(source + ": give either mix: or top-level input_tokens/output_tokens, not both");
    std::size_t index = 0;
    for (const auto& entry : doc.at("mix")) {
      RequestClass c;
      c.name = entry.value("name", fmt::format("class{}", index));
      c.weight = entry.value("weight", 1.0);
      const std::string where = fmt::format("{}: mix[{}]", source, index);
      c.input_tokens = length_from(entry.at("input_tokens"), where + ".input_tokens", base_dir);
      c.output_tokens = length_from(entry.at("output_tokens"), where + ".output_tokens", base_dir);
      p.classes.push_back(std::move(c));
      ++index;
    }
  } else {
    if (!doc.contains("input_tokens") || !doc.contains("output_tokens"))
      throw InputError(source + ": input_tokens and output_tokens are required (or a mix: list)");
    RequestClass c;
    c.name = p.name;
    c.input_tokens = length_from(doc.at("input_tokens"), source + ": input_tokens", base_dir);
    c.output_tokens = length_from(doc.at("output_tokens"), source + ": output_tokens", base_dir);
    p.classes.push_back(std::move(c));
  }
  double total = 0;
  for (const auto& c : p.classes)
    total += c.weight;
  if (p.classes.empty() || !(total > 0))
    throw InputError(source + ": the request classes' weights sum to zero");
  return p;
}

ServingProfile
load_serving_profile(const std::filesystem::path& file) {
  return parse_serving_profile(read_input_file(file), file.string(), file.parent_path());
}

std::vector<std::string>
list_serving_profiles() {
  return bundled_yaml_names(find_data_directory().path / "profiles" / "serving");
}

ServingProfile
resolve_serving_profile(const std::string& name_or_path) {
  return load_serving_profile(resolve_bundled_yaml(name_or_path, find_data_directory().path / "profiles" / "serving",
                                                   "--profile", "serving profile"));
}

std::int64_t
sample_length(const LengthDistribution& d, RandomSource& random) {
  double value = d.mean;
  switch (d.shape) {
  case LengthShape::fixed:
    break;
  case LengthShape::uniform:
    value = static_cast<double>(d.min +
                                static_cast<std::int64_t>(random.below(static_cast<std::uint64_t>(d.max - d.min + 1))));
    break;
  case LengthShape::normal:
    value = d.mean + d.stddev * random.normal();
    break;
  case LengthShape::lognormal: {
    // mean and stddev are the lengths' own, not their logarithm's
    const double variance = std::log1p((d.stddev * d.stddev) / (d.mean * d.mean));
    value = std::exp(std::log(d.mean) - variance / 2 + std::sqrt(variance) * random.normal());
    break;
  }
  case LengthShape::empirical:
    value = static_cast<double>(d.values[random.below(d.values.size())]);
    break;
  }
  auto length = static_cast<std::int64_t>(std::llround(value));
  length = std::max(length, d.min);
  if (d.max > 0)
    length = std::min(length, d.max);
  return length;
}

std::vector<PlannedRequest>
plan_requests(const ServingProfile& profile, std::size_t count, std::uint64_t seed) {
  RandomSource random(seed ^ 0x9e3779b97f4a7c15ULL);
  double total = 0;
  for (const auto& c : profile.classes)
    total += c.weight;
  std::vector<PlannedRequest> plan(count);
  for (auto& request : plan) {
    double pick = random.uniform() * total;
    std::size_t index = 0;
    while (index + 1 < profile.classes.size() && pick >= profile.classes[index].weight) {
      pick -= profile.classes[index].weight;
      ++index;
    }
    const auto& c = profile.classes[index];
    request.class_index = index;
    request.input_tokens = std::max(sample_length(c.input_tokens, random), profile.shared_prefix_tokens + 1);
    request.output_tokens = sample_length(c.output_tokens, random);
    if (profile.cancel_fraction > 0 && random.uniform() < profile.cancel_fraction) // drawn only then, as below
      request.cancel_after_s = profile.cancel_after_s;
    if (profile.shared_prefix_groups > 1) // drawn only then: single-prefix plans stay as they were
      request.prefix_group =
          static_cast<std::size_t>(random.below(static_cast<std::uint64_t>(profile.shared_prefix_groups)));
  }
  return plan;
}

std::vector<std::vector<PlannedRequest>>
plan_conversations(const ServingProfile& profile, std::size_t count, std::uint64_t seed) {
  auto requests = plan_requests(profile, count, seed);
  RandomSource random(seed ^ 0xc2b2ae3d27d4eb4fULL);
  std::vector<std::vector<PlannedRequest>> conversations;
  for (std::size_t next = 0; next < requests.size();) {
    const auto turns =
        std::min(static_cast<std::size_t>(std::max<std::int64_t>(1, sample_length(profile.turns, random))),
                 requests.size() - next);
    std::vector<PlannedRequest> conversation(requests.begin() + static_cast<std::ptrdiff_t>(next),
                                             requests.begin() + static_cast<std::ptrdiff_t>(next + turns));
    for (std::size_t k = 1; k < conversation.size(); ++k) { // later questions: the same length, less the prefix
      conversation[k].input_tokens =
          std::max<std::int64_t>(1, conversation[k].input_tokens - profile.shared_prefix_tokens);
      conversation[k].prefix_group = conversation.front().prefix_group;
    }
    conversations.push_back(std::move(conversation));
    next += turns;
  }
  return conversations;
}

PaddedBatch
padded_batch_lengths(const ServingProfile& profile, int batch, std::uint64_t seed, int batches) {
  const auto size = static_cast<std::size_t>(std::max(1, batch));
  const auto requests = plan_requests(profile, size * static_cast<std::size_t>(std::max(1, batches)), seed);
  PaddedBatch mean;
  for (std::size_t first = 0; first < requests.size(); first += size) {
    std::int64_t input = 0, output = 0;
    for (std::size_t i = first; i < first + size; ++i) {
      input = std::max(input, requests[i].input_tokens);
      output = std::max(output, requests[i].output_tokens);
    }
    mean.input_tokens += static_cast<double>(input);
    mean.output_tokens += static_cast<double>(output);
  }
  const double n = static_cast<double>(requests.size() / size);
  return {mean.input_tokens / n, mean.output_tokens / n};
}

} // namespace optkit::bench
