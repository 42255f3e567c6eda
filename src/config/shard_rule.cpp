// The one rule between two variables: MATE_PYTEST_SHARD_INDEX below MATE_PYTEST_SHARD_TOTAL.
// Its message is worded here once for `mate env --check`, MATE's GoogleTest main
// (tests/support/test_shards.cpp) and its pytest plugin (mate.pytest_plugin).
#include <string>

#include "mate/config.hpp"

namespace mate::config {

std::string shard_index_error(std::int64_t index, std::int64_t total) {
  if (index < total) return "";
  return "MATE_PYTEST_SHARD_INDEX=" + std::to_string(index) + " is not below MATE_PYTEST_SHARD_TOTAL=" +
         std::to_string(total) + "; accepted: 0 to " + std::to_string(total - 1);
}

}  // namespace mate::config
