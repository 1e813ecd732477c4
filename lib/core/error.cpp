#include "core/error.hpp"

#include <cstring>

namespace optkit {

std::string
errno_text(int err) {
  return std::strerror(err);
}

} // namespace optkit
