#include "bench/request_record.hpp"

namespace optkit::bench {

double
RequestRecord::tpot() const {
  if (output_tokens < 2 || first_token < 0 || end < 0)
    return -1;
  return (end - first_token) / static_cast<double>(output_tokens - 1);
}

} // namespace optkit::bench
