// `mate env`: the MATE variables of the current shell, the full reference, JSON, Markdown, and a
// check for launch scripts.
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "json_text.hpp"
#include "config/env_report.hpp"

namespace mate::cli {

namespace {

void add_env_command(CLI::App& app, int& exit_code) {
  struct Flags {
    bool all = false, internal = false, json = false, check = false, markdown = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("env", "Show MATE environment variables and check their values");
  cmd->add_flag("--all", flags->all, "Every public variable: type, default, current value, source, meaning");
  cmd->add_flag("--internal", flags->internal, "With --all: internal, test-only and external variables too");
  cmd->add_flag("--json", flags->json, "Print as JSON");
  cmd->add_flag("--check", flags->check, "Exit 1 if a set variable is invalid or unknown");
  CLI::Option* markdown =
      cmd->add_flag("--markdown", flags->markdown, "Print the reference table (docs/reference/environment.md)");
  // The reference is the same whatever is set: it combines with nothing.
  for (const char* other : {"--all", "--internal", "--json", "--check"}) markdown->excludes(other);
  cmd->callback([flags, &exit_code] {
    if (flags->markdown) {
      std::cout << config::render_markdown();
      exit_code = kExitOk;
      return;
    }
    config::EnvReportOptions options{flags->all || flags->internal, flags->internal};
    auto rows = config::collect(options);
    if (flags->json) std::cout << json_text(config::render_json(rows)) << "\n";
    else std::cout << config::render_text(rows, options);
    exit_code = kExitOk;
    if (flags->check) {
      // --check looks at what is set, whatever else was asked to be shown.
      auto found = config::problems(config::collect({}));
      for (const auto& p : found) std::fprintf(stderr, "mate env: %s\n", p.c_str());
      if (!found.empty()) exit_code = kExitFailed;
    }
  });
}

}  // namespace

MATE_CLI_COMMAND(10, add_env_command);

}  // namespace mate::cli
