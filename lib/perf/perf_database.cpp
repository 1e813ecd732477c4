#include "perf/perf_database.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/text.hpp"

#include <charconv>
#include <cmath>

namespace optkit::perf {

namespace {

std::string
make_key(const std::string& table, const std::vector<std::string>& fields) {
  std::string key = table;
  for (const auto& field : fields)
    (key += '|') += field;
  return key;
}

std::string
integer_text(double value) {
  return std::to_string(static_cast<long long>(std::llround(value)));
}

double
expected_experts_touched(double experts, double routed_tokens, double topk) {
  if (experts <= 0)
    return 0;
  const double per_token_miss = 1.0 - std::min(1.0, topk / experts);
  return experts * (1.0 - std::pow(per_token_miss, routed_tokens / std::max(topk, 1.0)));
}

double
kv_element_bytes(const std::string& kv_dtype) {
  return bytes_per_element(parse_precision(kv_dtype, "kv_dtype"));
}

std::optional<CollectiveOp>
parse_collective(const std::string& name) {
  for (auto op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::all_to_all, CollectiveOp::p2p})
    if (collective_name(op) == name)
      return op;
  return std::nullopt;
}

} // namespace

const std::vector<PerfTable>&
perf_tables() {
  static const std::vector<PerfTable> tables = {
      {"gemm.csv", {"kind", "m", "n", "k", "latency_us"}},
      {"attention_prefill.csv", {"kv_dtype", "heads", "kv_heads", "head_dim", "batch", "seq", "latency_us"}},
      {"attention_decode.csv", {"kv_dtype", "heads", "kv_heads", "head_dim", "batch", "kv_len", "latency_us"}},
      {"moe.csv", {"kind", "hidden", "inter", "topk", "experts", "tokens", "latency_us"}},
      {"collective.csv", {"op", "gpus", "bytes", "latency_us"}},
      {"memory.csv", {"bytes", "latency_us"}},
  };
  return tables;
}

std::pair<double, double>
gemm_kind_bytes(const std::string& kind) {
  if (kind == "fp8" || kind == "int8")
    return {1.0, 1.0};
  if (kind == "w8a16")
    return {bytes_per_element(Precision::int8), 2.0};
  if (kind == "w4a16")
    return {bytes_per_element(Precision::int4), 2.0};
  return {2.0, 2.0};
}

double
PerfDatabase::point_speed_of_light(const std::string& table, const std::vector<std::string>& key, double x,
                                   double y) const {
  const SystemSpec& s = *m_system;
  const double bandwidth = s.memory_bandwidth_gbs * 1e9;
  const auto number = [&](std::size_t i) { return std::stod(key[i]); };
  if (table == "gemm") {
    const auto [w, a] = gemm_kind_bytes(key[0]);
    return speed_of_light_us(gemm_cost(x, number(1), number(2), w, a), s.peak_flops(key[0]), bandwidth);
  }
  if (table == "attention_prefill" || table == "attention_decode") {
    const double kv_bytes = kv_element_bytes(key[0]);
    const double heads = number(1), kv_heads = number(2), head_dim = number(3);
    const OpCost cost = table == "attention_prefill"
                            ? attention_prefill_cost(x, y, 0, heads, kv_heads, head_dim, head_dim, kv_bytes)
                            : attention_decode_cost(x, y, heads, head_dim, head_dim, 2 * kv_heads * head_dim, kv_bytes);
    return speed_of_light_us(cost, s.peak_flops("bf16"), bandwidth);
  }
  if (table == "moe") {
    const auto [w, a] = gemm_kind_bytes(key[0]);
    const double routed = x * number(3);
    const OpCost cost =
        moe_cost(routed, number(1), number(2), expected_experts_touched(number(4), routed, number(3)), w, a);
    return speed_of_light_us(cost, s.peak_flops(key[0]), bandwidth);
  }
  if (table == "collective")
    return collective_speed_of_light_us(s, *parse_collective(key[0]), x, int(number(1)));
  return speed_of_light_us({0, x}, 1, bandwidth); // memory
}

void
PerfDatabase::add_point(const std::string& table, const std::vector<std::string>& key, double x, double y,
                        double latency_us) {
  m_grids[make_key(table, key)].add(x, y, latency_us, point_speed_of_light(table, key, x, y));
  ++m_points;
}

void
PerfDatabase::finish() {
  for (auto& [key, grid] : m_grids)
    grid.finish();
  m_nearest_gemm->sites.clear();
}

PerfDatabase
PerfDatabase::load(const std::filesystem::path& dir, const SystemSpec& system) {
  PerfDatabase db(system);
  db.m_directory = dir;
  for (const auto& table : perf_tables()) {
    const auto file = dir / table.file;
    if (std::filesystem::exists(file))
      db.add_table(table, read_input_file(file), file.string());
  }
  db.finish();
  return db;
}

void
PerfDatabase::add_table(const PerfTable& table, const std::string& text, const std::string& source) {
  const std::string name = std::filesystem::path(table.file).stem().string();
  const std::string expected_header = join(std::vector<std::string>(table.columns.begin(), table.columns.end()), ",");
  std::size_t row = 0;
  bool header_seen = false;
  for (const auto& raw : split(text, '\n')) {
    ++row;
    const std::string line(trim(raw));
    if (line.empty() || line[0] == '#')
      continue;
    const auto where = source + ":" + std::to_string(row) + ": ";
    if (!header_seen) {
      if (line != expected_header)
        throw InputError(where + "header must be \"" + expected_header + "\"; rewrite it with optkit plan profile");
      header_seen = true;
      continue;
    }
    const auto fields = split(line, ',');
    if (fields.size() != table.columns.size())
      throw InputError(where + std::to_string(fields.size()) + " fields, expected " +
                       std::to_string(table.columns.size()) + " (" + expected_header + ")");
    std::vector<double> numbers(fields.size(), 0);
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const std::string column = table.columns[i];
      if (column == "kind" || column == "kv_dtype" || column == "op")
        continue;
      const auto& field = fields[i];
      const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), numbers[i]);
      if (error != std::errc() || end != field.data() + field.size() || !std::isfinite(numbers[i]) || numbers[i] <= 0 ||
          numbers[i] > 1e15)
        throw InputError(where + column + " \"" + field + "\" is not a positive number");
      // Shape and count columns are whole numbers that fit an int (they key the tables).
      if (column != "latency_us" && column != "bytes" && (numbers[i] > 1e9 || numbers[i] != std::floor(numbers[i])))
        throw InputError(where + column + " \"" + field + "\" must be a whole number up to 10^9");
    }
    const auto& first = fields[0];
    if (name == "gemm" && first != "bf16" && first != "fp16" && first != "fp8" && first != "int8" && first != "w8a16" &&
        first != "w4a16")
      throw InputError(where + "kind \"" + first + "\" is not one of bf16, fp16, fp8, int8, w8a16, w4a16");
    if (name == "moe" && first != "bf16" && first != "fp16" && first != "fp8" && first != "int8" && first != "w8a16" &&
        first != "w4a16")
      throw InputError(where + "kind \"" + first + "\" is not one of bf16, fp16, fp8, int8, w8a16, w4a16");
    if ((name == "attention_prefill" || name == "attention_decode") && first != "bf16" && first != "fp16" &&
        first != "fp8" && first != "int8")
      throw InputError(where + "kv_dtype \"" + first + "\" is not one of bf16, fp16, fp8, int8");
    if (name == "collective" && !parse_collective(first))
      throw InputError(where + "op \"" + first + "\" is not one of all_reduce, all_gather, all_to_all, p2p");
    if (name == "collective" && first != "p2p" && numbers[1] < 2)
      throw InputError(where + "a collective needs at least 2 gpus");
    const double latency = numbers.back();
    if (name == "gemm")
      add_point(name, {first, integer_text(numbers[2]), integer_text(numbers[3])}, numbers[1], 0, latency);
    else if (name == "attention_prefill" || name == "attention_decode")
      add_point(name, {first, integer_text(numbers[1]), integer_text(numbers[2]), integer_text(numbers[3])}, numbers[4],
                numbers[5], latency);
    else if (name == "moe")
      add_point(name,
                {first, integer_text(numbers[1]), integer_text(numbers[2]), integer_text(numbers[3]),
                 integer_text(numbers[4])},
                numbers[5], 0, latency);
    else if (name == "collective")
      add_point(name, {first, integer_text(numbers[1])}, numbers[2], 0, latency);
    else
      add_point(name, {}, numbers[0], 0, latency);
  }
  if (!header_seen)
    throw InputError(source + ": empty table; delete it or rerun optkit plan profile");
}

const UtilizationGrid*
PerfDatabase::grid(const std::string& key) const {
  const auto it = m_grids.find(key);
  return it == m_grids.end() ? nullptr : &it->second;
}

template <typename KeyFields>
const UtilizationGrid*
PerfDatabase::site_grid(const char* table, const KeyFields& key) const {
  if (m_sites == nullptr && m_grids.empty())
    return nullptr;
  const std::vector<std::string> fields = key();
  record_site(table, fields);
  return grid(make_key(table, fields));
}

void
PerfDatabase::record_site(const char* table, const std::vector<std::string>& fields) const {
  if (m_sites == nullptr)
    return;
  const std::lock_guard lock(*m_sites_mutex);
  m_sites->insert({table, fields});
}

// A GEMM shape nobody measured borrows the utilization curve of the nearest measured (n, k) of the
// same kind within two octaves on both axes (real model shapes are scattered, not a grid).
PerfDatabase::GemmSite
PerfDatabase::gemm_site(const std::string& kind, double n, double k) const {
  const std::string key = make_key("gemm", {kind, integer_text(n), integer_text(k)});
  if (const auto* exact = grid(key))
    return {exact, false};
  {
    const std::shared_lock lock(m_nearest_gemm->mutex);
    if (const auto it = m_nearest_gemm->sites.find(key); it != m_nearest_gemm->sites.end())
      return it->second;
  }
  const UtilizationGrid* best = nullptr;
  double best_distance = 8.0; // (2 octaves)² on each axis at most
  const std::string prefix = "gemm|" + kind + "|";
  for (const auto& [site, site_grid] : m_grids) {
    if (!site.starts_with(prefix))
      continue;
    const auto parts = split(site, '|');
    const double dn = std::log2(std::stod(parts[2]) / n), dk = std::log2(std::stod(parts[3]) / k);
    if (std::abs(dn) > 2 || std::abs(dk) > 2)
      continue;
    const double distance = dn * dn + dk * dk;
    if (distance < best_distance) {
      best_distance = distance;
      best = &site_grid;
    }
  }
  const GemmSite site{best, best != nullptr};
  const std::unique_lock lock(m_nearest_gemm->mutex);
  m_nearest_gemm->sites.emplace(key, site);
  return site;
}

Estimate
PerfDatabase::answer(const UtilizationGrid* site, double x, double y, double speed_of_light, OpClass op_class,
                     const OpCost& cost, double peak) const {
  if (site == nullptr)
    return roofline_estimate(*m_system, op_class, cost, peak);
  const GridAnswer found = site->query(x, y);
  if (found.measured_us >= 0)
    return {found.measured_us, measured};
  return {speed_of_light / found.utilization, found.source};
}

Estimate
PerfDatabase::gemm(const std::string& kind, double m, double n, double k) const {
  const auto [w, a] = gemm_kind_bytes(kind);
  const OpCost cost = gemm_cost(m, n, k, w, a);
  const double peak = m_system->peak_flops(kind);
  const double sol = speed_of_light_us(cost, peak, m_system->memory_bandwidth_gbs * 1e9);
  if (m_sites != nullptr)
    record_site("gemm", {kind, integer_text(n), integer_text(k)});
  const GemmSite site = m_grids.empty() ? GemmSite{} : gemm_site(kind, n, k);
  Estimate estimate = answer(site.grid, m, 0, sol, OpClass::gemm, cost, peak);
  if (site.borrowed) // a borrowed curve is never better than "extrapolated"
    estimate.sources = extrapolated;
  return estimate;
}

Estimate
PerfDatabase::attention(const char* table, const std::string& kv_dtype, int heads, int kv_heads, int head_dim,
                        double batch, double length, const OpCost& cost, OpClass op_class, bool shape_measured) const {
  const double peak = m_system->peak_flops("bf16");
  const double sol = speed_of_light_us(cost, peak, m_system->memory_bandwidth_gbs * 1e9);
  const UtilizationGrid* site = site_grid(table, [&] {
    return std::vector<std::string>{kv_dtype, std::to_string(heads), std::to_string(kv_heads),
                                    std::to_string(head_dim)};
  });
  Estimate estimate = answer(site, batch, length, sol, op_class, cost, peak);
  // A measured point of a different shape (a cached prefix, several tokens per sequence) lends
  // its utilization, not its latency.
  if (!shape_measured && (estimate.sources & measured))
    estimate = {sol / site->query(batch, length).utilization, interpolated};
  return estimate;
}

Estimate
PerfDatabase::attention_prefill(const std::string& kv_dtype, int heads, int kv_heads, int head_dim, double batch,
                                double seq, double prefix) const {
  const OpCost cost =
      attention_prefill_cost(batch, seq, prefix, heads, kv_heads, head_dim, head_dim, kv_element_bytes(kv_dtype));
  return attention("attention_prefill", kv_dtype, heads, kv_heads, head_dim, batch, seq, cost, OpClass::attention,
                   prefix == 0);
}

Estimate
PerfDatabase::attention_decode(const std::string& kv_dtype, int heads, int kv_heads, int head_dim, double batch,
                               double kv_len, double tokens_per_sequence) const {
  const OpCost cost = attention_decode_cost(batch, kv_len, heads, head_dim, head_dim, 2.0 * kv_heads * head_dim,
                                            kv_element_bytes(kv_dtype), tokens_per_sequence);
  return attention("attention_decode", kv_dtype, heads, kv_heads, head_dim, batch, kv_len, cost,
                   OpClass::decode_attention, tokens_per_sequence == 1);
}

Estimate
PerfDatabase::moe(const std::string& kind, int hidden, int inter, int topk, int experts, double tokens,
                  double imbalance) const {
  const auto [w, a] = gemm_kind_bytes(kind);
  const double routed = tokens * topk * imbalance;
  const OpCost cost = moe_cost(routed, hidden, inter, expected_experts_touched(experts, routed, topk), w, a);
  const double peak = m_system->peak_flops(kind);
  const double sol = speed_of_light_us(cost, peak, m_system->memory_bandwidth_gbs * 1e9);
  const UtilizationGrid* site = site_grid("moe", [&] {
    return std::vector<std::string>{kind, std::to_string(hidden), std::to_string(inter), std::to_string(topk),
                                    std::to_string(experts)};
  });
  Estimate estimate = answer(site, tokens * imbalance, 0, sol, OpClass::gemm, cost, peak);
  if (imbalance != 1.0 && (estimate.sources & measured))
    estimate.sources = interpolated;
  return estimate;
}

Estimate
PerfDatabase::collective(CollectiveOp op, int gpus, double bytes) const {
  if (gpus <= 1 && op != CollectiveOp::p2p)
    return {0, 0};
  const UtilizationGrid* site =
      m_grids.empty() ? nullptr : grid(make_key("collective", {collective_name(op), std::to_string(gpus)}));
  if (site == nullptr)
    return roofline_collective(*m_system, op, bytes, gpus);
  const GridAnswer found = site->query(bytes, 0);
  if (found.measured_us >= 0)
    return {found.measured_us, measured};
  return {collective_speed_of_light_us(*m_system, op, bytes, gpus) / found.utilization, found.source};
}

Estimate
PerfDatabase::memory(double bytes) const {
  const OpCost cost{0, bytes};
  const double sol = speed_of_light_us(cost, 1, m_system->memory_bandwidth_gbs * 1e9);
  return answer(m_grids.empty() ? nullptr : grid("memory"), bytes, 0, sol, OpClass::memory, cost, 1);
}

} // namespace optkit::perf
