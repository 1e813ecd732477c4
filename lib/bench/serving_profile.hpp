// A serving profile Π (profiles/serving/*.yaml or a user file): what one request looks like —
// input and output token-length distributions, a weighted mix of request classes, a prefix
// every prompt shares, chat or completions, and whether output lengths are forced — and how
// requests arrive. Drawing from it is seeded: the same seed gives the same request plan.
#pragma once

#include "bench/arrivals.hpp"
#include "bench/slo.hpp"
#include "core/random_source.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace optkit::bench {

enum class LengthShape { fixed, uniform, normal, lognormal, empirical };

struct LengthDistribution {
  LengthShape shape = LengthShape::fixed;
  double mean = 128;
  double stddev = 0;
  std::int64_t min = 1;
  std::int64_t max = 0;             // 0: no upper bound
  std::vector<std::int64_t> values; // empirical
};

struct RequestClass {
  std::string name;
  double weight = 1;
  LengthDistribution input_tokens;
  LengthDistribution output_tokens;
};

enum class Api { completions, chat };
std::string to_string(Api api);

struct ServingProfile {
  std::string name;
  std::string description;
  Api api = Api::completions;
  std::vector<RequestClass> classes; // at least one
  std::int64_t shared_prefix_tokens = 0;
  // How many distinct shared prefixes (system prompts) there are: each request starts with one of
  // them, drawn uniformly, so K groups of requests each share their own.
  std::int64_t shared_prefix_groups = 1;
  // Request cancellation, as users closing a tab: this share of requests is abandoned by the
  // client cancel_after_s seconds after it is sent (the server sees a disconnect).
  double cancel_fraction = 0;
  double cancel_after_s = 1;
  // Multi-turn chat (api: chat only): each conversation has `turns` requests; the next turn is
  // sent think_time_s after the previous answer arrives and carries the whole history (every
  // earlier question and the answer as the server gave it), so prompts grow turn by turn. The
  // first question starts with the shared prefix; a later one is its input_tokens less the prefix.
  LengthDistribution turns{LengthShape::fixed, 1}; // fixed 1: single requests
  double think_time_s = 0;
  bool multi_turn() const { return turns.shape != LengthShape::fixed || turns.mean > 1; }
  bool ignore_eos = true; // and min_tokens = max_tokens, so output lengths are the profile's
  double temperature = 0;
  ArrivalProcess arrival = ArrivalProcess::poisson;
  double burstiness = 1;
  std::vector<SloRule> slos; // used when --slo gives none (plan --bench-profile writes its SLA here)
  double planned_rate = 0;   // load.request_rate: the search's first rate when --initial-rate is not given
  nlohmann::json resolved;   // the validated document, for the archive
};

// A profile file, validated (file:line:col errors); empirical lengths may name a JSONL file
// (`file:` and `field:`), read relative to the profile.
ServingProfile load_serving_profile(const std::filesystem::path& file);
ServingProfile parse_serving_profile(const std::string& yaml_text, const std::string& source,
                                     const std::filesystem::path& base_dir = {});
// NAME (profiles/serving/NAME.yaml under the data directory) or a path.
ServingProfile resolve_serving_profile(const std::string& name_or_path);
std::vector<std::string> list_serving_profiles();

struct PlannedRequest {
  std::size_t class_index = 0;
  std::int64_t input_tokens = 0; // including the shared prefix
  std::int64_t output_tokens = 0;
  std::size_t prefix_group = 0; // which shared prefix it starts with (shared_prefix_groups)
  double cancel_after_s = -1;   // the client abandons it this long after sending it (-1: never)
  // A Mooncake trace's block ids: requests whose ids begin alike share those prompt blocks.
  std::vector<std::int64_t> prefix_blocks;
};

// `count` requests drawn from the profile; deterministic in `seed`.
std::vector<PlannedRequest> plan_requests(const ServingProfile& profile, std::size_t count, std::uint64_t seed);

// `count` requests of a multi-turn profile grouped into conversations: each conversation's turn
// count drawn from profile.turns (the last one cut so the total is `count`), its turns the
// requests plan_requests draws, in order. Only a conversation's first turn starts with the
// shared prefix; a later question is its input_tokens less the prefix. Deterministic in `seed`.
std::vector<std::vector<PlannedRequest>> plan_conversations(const ServingProfile& profile, std::size_t count,
                                                            std::uint64_t seed);

std::int64_t sample_length(const LengthDistribution& distribution, RandomSource& random);

// A padded static batch of `batch` requests from the profile (what plan hetero's SplitQuant cost
// model assumes): every prompt padded to the batch's longest and generation running until its
// longest output. The mean of both over `batches` batches drawn with `seed`.
struct PaddedBatch {
  double input_tokens = 0;
  double output_tokens = 0;
};
PaddedBatch padded_batch_lengths(const ServingProfile& profile, int batch, std::uint64_t seed, int batches = 1000);

} // namespace optkit::bench
