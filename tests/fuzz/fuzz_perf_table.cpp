// libFuzzer target: perf-database CSV tables (the first byte picks the table) must load or throw
// InputError, never crash, for any bytes.
#include "core/error.hpp"
#include "perf/perf_database.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  static const optkit::perf::SystemSpec system = [] {
    optkit::perf::SystemSpec s;
    s.name = "fuzz";
    s.memory_gib = 80;
    s.memory_bandwidth_gbs = 3350;
    s.fp16_tflops = s.bf16_tflops = 989;
    s.fp8_tflops = s.int8_tops = 1979;
    s.gpus_per_node = 8;
    s.intra_node_bandwidth_gbs = 450;
    s.inter_node_bandwidth_gbs = 50;
    return s;
  }();
  const auto& tables = optkit::perf::perf_tables();
  const auto& table = tables[data[0] % tables.size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  optkit::perf::PerfDatabase db(system);
  try {
    db.add_table(table, text, "fuzz.csv");
    db.finish();
    (void)db.gemm("bf16", 7, 4096, 4096);
    (void)db.attention_decode("bf16", 8, 1, 128, 3, 1000);
    (void)db.attention_prefill("bf16", 8, 1, 128, 2, 500, 0);
    (void)db.moe("bf16", 4096, 1536, 8, 128, 50, 1.3);
    (void)db.collective(optkit::perf::CollectiveOp::all_reduce, 4, 1e6);
    (void)db.memory(1e6);
  } catch (const optkit::InputError&) {
  }
  return 0;
}
