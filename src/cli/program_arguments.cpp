#include "program_arguments.hpp"

namespace mate::cli {

std::vector<std::string> with_end_of_options(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return args;
  const CLI::App* sub = nullptr;
  for (const CLI::App* candidate : app.get_subcommands({})) {
    if (candidate->check_name(args[0])) sub = candidate;
  }
  const CLI::Option* command = sub != nullptr ? sub->get_option_no_throw("command") : nullptr;
  if (command == nullptr || !command->get_positional()) return args;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return args;
    if (arg.size() > 1 && arg[0] == '-') {
      // An option of the subcommand; one that takes a value ("--mode head") takes the next word,
      // unless written "--mode=head". An unknown option is left for CLI11 to report as it is.
      const std::string name = arg.substr(0, arg.find('='));
      const CLI::Option* option = sub->get_option_no_throw(name);
      if (option == nullptr) return args;
      if (name.size() == arg.size() && option->get_items_expected_max() > 0) ++i;
      continue;
    }
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), "--");
    return args;
  }
  return args;
}

}  // namespace mate::cli
