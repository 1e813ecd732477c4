// How one engine instance (a worker) spreads a model over its GPUs.
#pragma once

#include <string>

namespace optkit::perf {

struct ParallelConfig {
  int tp = 1; // tensor parallel (attention heads, dense FFN)
  int pp = 1; // pipeline stages
  int dp = 1; // attention data parallel inside the worker (MoE models: attention replicated)
  int ep = 1; // expert parallel (MoE); each expert further split moe_tp() ways

  int gpus() const { return tp * dp * pp; }
  int moe_tp() const { return tp * dp / ep; }
  // "tp4pp1", "tp2dp4ep8pp1": the form engines and AIConfigurator users read.
  std::string label(bool moe) const;
};

} // namespace optkit::perf
