// What serve-deltas computes with, built from its options: the CPU transformer, beside which a
// DeltaStore serves the --delta variants decoupled (the default), the same variants as whole
// merged models swapped in one at a time (--baseline swap), or the mock model (--mock); with the
// KV budget, and the engine options the choice requires. `optkit serve-deltas` and tests/perf
// share it.
#pragma once

#include "serve/api_server.hpp"
#include "serve/delta_store.hpp"
#include "serve/serve_run.hpp"
#include "serve/swap_model.hpp"

#include <memory>
#include <vector>

namespace optkit::serve {

struct LoadedModel {
  std::unique_ptr<runtime::LanguageModel> model;
  const runtime::KvCache* kv = nullptr; // the model's cache, for the engine's admission
  std::vector<ServedVariant> variants;  // fixed variants (--baseline swap); decoupled deltas go to a DeltaStore
  runtime::CpuTransformer* transformer = nullptr; // decoupled serving: the model deltas are served beside
  EngineOptions engine;                           // options.engine, with what the delta serving mode needs
  const SwapModel* swap = nullptr;                // with --baseline swap: the model (its swap counts), owned by `model`
  unsigned threads = 0;                           // runtime threads, resolved (0: the mock model computes nothing)
  std::string device_name;                        // the step's CUDA device (empty: the CPU)
};

// Throws InputError naming the flag for a combination that cannot be served.
LoadedModel load_served_model(const ServeOptions& options, const model::Tokenizer& tokenizer);

// With decoupled serving, the delta store beside `engine`, holding options.deltas and options.loras
// in that order (variant ids 0, 1, ...); null otherwise. Throws InputError naming the flag and
// folder of one that cannot be served, or a name that is the base's (`base_name`).
std::unique_ptr<DeltaStore> serve_beside(const ServeOptions& options, const LoadedModel& loaded, Engine& engine,
                                         const std::string& base_name);

} // namespace optkit::serve
