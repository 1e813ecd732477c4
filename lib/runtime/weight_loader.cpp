#include "runtime/weight_loader.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace optkit::runtime {

namespace {

void
check_shape(const model::TensorView& view, const std::vector<std::int64_t>& expected) {
  if (view.shape() != expected)
    throw InputError(fmt::format("tensor '{}' has shape [{}] but the config implies [{}]", view.info->name,
                                 fmt::join(view.shape(), ", "), fmt::join(expected, ", ")));
}

} // namespace

std::unique_ptr<LinearWeight>
load_linear(const model::WeightStore& store, const std::string& prefix, std::int64_t rows, std::int64_t cols) {
  const auto view = store.require(prefix + ".weight");
  check_shape(view, {rows, cols});
  switch (view.dtype()) {
  case model::DType::f32:
  case model::DType::bf16:
  case model::DType::f16:
    return make_dense_weight(view.dtype(), view.bytes, rows, cols);
  default:
    throw InputError(fmt::format("tensor '{}' is {}, which the runtime cannot use as a dense weight (expected F32, "
                                 "BF16 or F16)",
                                 view.info->name, model::dtype_name(view.dtype())));
  }
}

std::vector<float>
load_vector(const model::WeightStore& store, const std::string& name, std::int64_t size) {
  const auto view = store.require(name);
  check_shape(view, {size});
  std::vector<float> out(static_cast<std::size_t>(size));
  for (std::int64_t i = 0; i < size; ++i)
    out[static_cast<std::size_t>(i)] = view.at(static_cast<std::size_t>(i));
  return out;
}

} // namespace optkit::runtime
