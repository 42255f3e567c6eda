// The `mate` program: parses the command line, runs one subcommand, maps errors to exit codes.
#include <algorithm>
#include <cstdio>
#include <string>
#include <exception>

#include "build_info.hpp"
#include "commands.hpp"
#include "program_arguments.hpp"
#include "mate/config.hpp"
#include "mate/ops/modules.hpp"

int main(int argc, char** argv) {
  using namespace mate::cli;
  CLI::App app{"MATE: debugging, observability and build runtime for accelerator kernel libraries",
               "mate"};
  app.require_subcommand(1, 1);
  app.fallthrough(false);
  app.set_version_flag("--version", std::string("mate ") + build_info::kVersion);
  int exit_code = kExitOk;
  // The reference kernel library's modules, for module-status and aot-build (registered here:
  // a registration object inside the static library would be dropped by the linker).
  mate::ops::register_modules();
  add_all_commands(app, exit_code);

  const std::vector<CLI::App*> commands = app.get_subcommands({});
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
    // CLI11 would only say "A subcommand is required".
    std::string names;
    for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
    std::fprintf(stderr, "mate: unknown command '%s'; the commands are %s (mate --help)\n", argv[1], names.c_str());
    return kExitUsage;
  }
  if (argc > 1 && argv[1][0] == '-' && std::string(argv[1]) != "--" && !app.get_option_no_throw(argv[1])) {
    // CLI11 would say "A subcommand is required" for `mate --bogus`, naming neither.
    std::fprintf(stderr, "mate: unknown option '%s'; before a command mate takes only --help and --version (mate --help)\n",
                 argv[1]);
    return kExitUsage;
  }
  try {
    mate::config::warn_unknown_variables_once();
    std::vector<std::string> args = with_end_of_options(app, argc, argv);
    std::reverse(args.begin(), args.end());  // CLI11 takes the words last first
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  } catch (const mate::config::ConfigError& e) {
    std::fprintf(stderr, "mate: error: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mate: error: %s\n", e.what());
    return kExitFailed;
  }
  return exit_code;
}
