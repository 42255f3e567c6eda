// The `mate` program's entry: parses the command line, runs one subcommand, maps errors to exit
// codes. Compiled into libmate.so, so that `python -m mate` runs the same program.
#include <algorithm>
#include <cstdio>
#include <string>
#include <exception>

#include "build_info.hpp"
#include "cli/commands.hpp"
#include "cli/program_arguments.hpp"
#include "mate/cli/program.hpp"
#include "mate/config.hpp"
#include "mate/ops/modules.hpp"

namespace mate::cli {

int run_program(const std::vector<std::string>& words) {
  // CLI11 and the checks below read an argv; the program name is "mate" whoever runs it.
  std::vector<std::string> storage;
  storage.reserve(words.size() + 1);
  storage.push_back("mate");
  storage.insert(storage.end(), words.begin(), words.end());
  std::vector<char*> argv_storage;
  for (std::string& w : storage) argv_storage.push_back(w.data());
  argv_storage.push_back(nullptr);
  const int argc = static_cast<int>(storage.size());
  char** argv = argv_storage.data();
  CLI::App app{"MATE: debugging, observability and build runtime for accelerator kernel libraries",
               "mate"};
  app.require_subcommand(1, 1);
  app.fallthrough(false);
  app.set_version_flag("--version", std::string("mate ") + build_info::kVersion);
  int exit_code = kExitOk;
  // The reference kernel library's modules, for module-status and aot-build (registered once
  // however often the program runs in one process).
  ops::register_modules();
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
    config::warn_unknown_variables_once();
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
  } catch (const config::ConfigError& e) {
    std::fprintf(stderr, "mate: error: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mate: error: %s\n", e.what());
    return kExitFailed;
  }
  std::fflush(stdout);  // a caller in the same process (python -m mate) prints after us
  return exit_code;
}

}  // namespace mate::cli
