// `mate clear-cache`: removes the JIT module cache, safely while other processes use it.
#include <fmt/format.h>

#include "commands.hpp"
#include "mate/jit/clear_cache.hpp"

namespace mate::cli {

namespace {

void add_clear_cache_command(CLI::App& app, int& exit_code) {
  auto all = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("clear-cache", "Remove the JIT module cache of this MATE version");
  cmd->add_flag("--all-versions", *all, "Remove the caches of every MATE version (<base>/.cache/mate)");
  cmd->callback([all, &exit_code] {
    jit::ClearResult r = jit::clear_cache(*all);
    for (const auto& dir : r.leftovers)
      fmt::print("removed {}, left by an interrupted clear-cache\n", dir);
    if (!r.leftovers.empty()) fmt::print("  ({} bytes in all)\n", r.leftover_bytes);
    if (r.existed) fmt::print("removed {} ({} bytes)\n", r.path, r.bytes);
    else if (r.leftovers.empty()) fmt::print("nothing to remove: {} does not exist\n", r.path);
    else fmt::print("{} does not exist\n", r.path);
    exit_code = kExitOk;
  });
}

}  // namespace

MATE_CLI_COMMAND(41, add_clear_cache_command);

}  // namespace mate::cli
