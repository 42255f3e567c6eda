// `mate guard-run [--mode tail|head|auto] [--log-allocations] [--no-sync-on-free] [--no-backtraces]
//  [--align N] [--summary] [--report-file PATH] -- CMD ARGS...`:
// runs CMD with the guarded allocator installed before its first allocation.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mate/config.hpp"
#include "mate/guard/run.hpp"

namespace mate::cli {

namespace {

// --report-file's path, absolute (the program may change directory before it crashes); its
// directory must exist, unless %i is part of it (then it differs for every process).
std::string report_file_path(const std::string& given) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path = fs::absolute(given, ec);
  if (ec) throw CLI::ValidationError("--report-file", "cannot make '" + given + "' an absolute path: " + ec.message());
  const fs::path directory = path.parent_path();
  if (directory.string().find("%i") == std::string::npos && !fs::is_directory(directory, ec))
    throw CLI::ValidationError("--report-file", "the directory of '" + given + "' (" + directory.string() +
                                                    ") does not exist; give a path in an existing directory");
  if (fs::is_directory(path, ec))
    throw CLI::ValidationError("--report-file", "'" + given + "' is a directory; give a file path");
  return path.string();
}

void add_guard_run_command(CLI::App& app, int& exit_code) {
  struct Flags {
    std::string mode = "tail";
    bool log_allocations = false;
    bool no_sync_on_free = false;
    bool no_backtraces = false;
    std::vector<std::string> command;
    // The map-entry policy's and the workflow's options (issue 20).
    std::size_t align = 0;
    bool summary = false;
    std::string report_file;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "guard-run", "Run a program with the guarded allocator: overruns, underruns and use-after-free fault at once");
  cmd->add_option("--mode", flags->mode,
                  "Which side faults at once: tail (overruns) or head (underruns); auto runs tail, and when that "
                  "run finds a corrupted canary at free instead of a fault, runs the same command again on the "
                  "side that faults there and prints a verdict (needs a deterministic program)")
      ->check(CLI::IsMember({"tail", "head", "auto"}));
  cmd->add_flag("--log-allocations", flags->log_allocations, "One line per guarded alloc/free on stderr");
  cmd->add_flag("--no-sync-on-free", flags->no_sync_on_free, "Do not synchronize the device before checking canaries");
  cmd->add_flag("--no-backtraces", flags->no_backtraces,
                "Record no allocation/free backtraces: faster and lighter, reports without stacks "
                "(MATE_GUARD_BACKTRACES=0)");
  cmd->add_option("--align", flags->align,
                  "Alignment of guarded malloc/calloc/realloc blocks, a power of two from 1 to 4096 (default: "
                  "max_align_t's, 16; below that each block keeps the alignment its size implies): 1 ends an "
                  "odd-size buffer exactly at the guard, so a 1-byte overrun faults at the access (Electric "
                  "Fence's EF_ALIGNMENT); a header of stricter alignment at the start of an odd-size block is "
                  "then misaligned. posix_memalign/aligned_alloc/memalign keep theirs")
      ->check([](const std::string& text) -> std::string {
        std::size_t used = 0;
        unsigned long long v = 0;
        try {
          v = std::stoull(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || text.empty() || text[0] == '-' || v == 0 || v > 4096 || (v & (v - 1)) != 0)
          return "--align " + text + ": expected a power of two from 1 to 4096 (1, 2, 4, ..., 4096)";
        return "";
      });
  cmd->add_flag("--summary", flags->summary,
                "At exit, one line on stderr: how many allocations were guarded (and their MiB), how many not "
                "and why (implied by --log-allocations)");
  cmd->add_option("--report-file", flags->report_file,
                  "Also write the guard's reports to this file (%i: the process ID; created 0600, appended to). "
                  "They still go to the stderr the program started with");
  // Options end at the program's name (program_arguments.hpp): what follows is the program's.
  cmd->add_option("command", flags->command, "The program and its arguments (after -- or the first word that is no option)")
      ->required()->expected(-1);
  cmd->callback([flags, &exit_code] {
    // Checked here so that a bad value is a usage error before the child starts.
    (void)config::guard_min_bytes();
    (void)config::guard_quarantine_mb();
    (void)config::guard_symbolize();
    if (!flags->no_backtraces) (void)config::guard_backtraces();  // the flag replaces it
    guard::GuardRunOptions options;
    options.mode = flags->mode == "head" ? guard::Mode::Head : guard::Mode::Tail;
    options.sync_on_free = !flags->no_sync_on_free;
    options.log_allocations = flags->log_allocations;
    options.backtraces = !flags->no_backtraces;  // else MATE_GUARD_BACKTRACES reaches the child as set
    (void)config::guard_map_reserve();
    (void)config::guard_small_share();
    (void)config::guard_small_bytes();
    options.align = flags->align;
    options.summary = flags->summary || flags->log_allocations;
    if (!flags->report_file.empty()) options.report_file = report_file_path(flags->report_file);
    exit_code = flags->mode == "auto" ? guard::run_guarded_auto(flags->command, options)
                                      : guard::run_guarded(flags->command, options);
  });
}

}  // namespace

MATE_CLI_COMMAND(20, add_guard_run_command);

}  // namespace mate::cli
