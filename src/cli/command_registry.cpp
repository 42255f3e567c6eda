#include <algorithm>
#include <utility>
#include <vector>

#include "commands.hpp"

namespace mate::cli {

namespace {
std::vector<std::pair<int, CommandAdder>>& registry() {
  static std::vector<std::pair<int, CommandAdder>> adders;
  return adders;
}
}  // namespace

CommandRegistration::CommandRegistration(int order, CommandAdder adder) {
  registry().emplace_back(order, adder);
}

void add_all_commands(CLI::App& app, int& exit_code) {
  auto adders = registry();
  std::sort(adders.begin(), adders.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [order, adder] : adders) adder(app, exit_code);
}

}  // namespace mate::cli
