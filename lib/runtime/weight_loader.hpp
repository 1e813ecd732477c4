// Builds the runtime's weights from a model folder's tensors, checking every shape against the
// config. The single place that decides which LinearWeight implementation a tensor gets.
#pragma once

#include "model/weight_store.hpp"
#include "runtime/linear_weight.hpp"

#include <memory>
#include <string>
#include <vector>

namespace optkit::runtime {

// `<prefix>.weight` as a [rows, cols] linear layer.
std::unique_ptr<LinearWeight> load_linear(const model::WeightStore& store, const std::string& prefix, std::int64_t rows,
                                          std::int64_t cols);
// A 1-D tensor of `size` values (norm weights, biases) widened to fp32.
std::vector<float> load_vector(const model::WeightStore& store, const std::string& name, std::int64_t size);

} // namespace optkit::runtime
