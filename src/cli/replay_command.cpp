// `mate replay`: runs dumped API calls again and compares their outputs with the recorded ones.
#include <dlfcn.h>

#include <filesystem>
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.hpp"
#include "json_text.hpp"
#include "mate/config.hpp"
#include "mate/log/api.hpp"
#include "mate/dump/tensor_file.hpp"
#include "mate/replay/guard_allocator.hpp"
#include "mate/replay/replay.hpp"

namespace mate::cli {

namespace {

// An integer or bool value compared exactly: its decimal text as a JSON integer (a double would
// print 3 as 3.0 and round i64/u64 values above 2^53). Every such value fits int64 or uint64.
nlohmann::json exact_value(const std::string& text, double approximate) {
  if (!text.empty() && text[0] == '-') {
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size()) return v;
  } else {
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size()) return v;
  }
  return approximate;
}

// --device: a device ordinal, as a plain number (the kind is each tensor's own).
CLI::Validator device_ordinal() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int v = -1;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || end != text.data() + text.size() || ec != std::errc() || v < 0 || v > 1023)
          return "'" + text + "' is not a device ordinal; accepted: a number from 0 to 1023 (--device 0 for cuda:0 " +
                 "and musa:0: each tensor keeps its kind)";
        return "";
      },
      "ORDINAL");
}

// --rtol and --atol. CLI11's NonNegativeNumber accepts nan (every element would then fail) and
// words its range with DBL_MAX written out in 300 digits.
CLI::Validator tolerance_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string accepted = "; accepted: a finite number >= 0";
        const char* begin = text.data() + (text.starts_with('+') ? 1 : 0);
        double v = 0;
        auto [end, ec] = std::from_chars(begin, text.data() + text.size(), v);
        if (text.empty() || end != text.data() + text.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
          return "'" + text + "' is not a number" + accepted;
        // Out of range is too large (not finite) or too small (1e-400: as good as 0).
        if (ec == std::errc::result_out_of_range && std::isinf(std::strtod(std::string(begin, end).c_str(), nullptr)))
          return "'" + text + "' is not finite" + accepted;
        if (!std::isfinite(v)) return "'" + text + "' is not finite" + accepted;
        if (v < 0) return "'" + text + "' is negative" + accepted;
        return "";
      },
      "NUMBER >= 0");
}

// True when API log records would go to this process's stdout.
bool log_goes_to_stdout() {
  try {
    const std::string dest = config::logdest();
    return dest.empty() || dest == "stdout" || dest == "/dev/stdout" || dest == "/proc/self/fd/1" || dest == "/dev/fd/1";
  } catch (const config::ConfigError&) {
    return false;  // the log disables itself with a message
  }
}

nlohmann::json to_json(const replay::CallResult& r) {
  nlohmann::json outputs = nlohmann::json::array();
  for (const replay::OutputCheck& c : r.outputs) {
    nlohmann::json o = {{"name", c.name}, {"ok", c.ok}, {"count", c.count}, {"mismatched", c.mismatched}};
    if (!c.problem.empty()) o["problem"] = c.problem;
    if (c.problem.empty() && c.compared_bits) {  // a dtype MATE does not decode: bits, no errors
      o["compared"] = "bits";
      if (c.mismatched > 0) o["where"] = c.where, o["got"] = c.got_exact, o["expected"] = c.expected_exact;
    } else if (c.problem.empty()) {
      o["max_abs_error"] = c.max_abs_error;
      o["max_rel_error"] = c.max_rel_error;
      if (!c.where.empty() || c.max_abs_error > 0) {  // the largest difference, when there is one
        o["where"] = c.where;
        o["got"] = c.got_exact.empty() ? nlohmann::json(c.got) : exact_value(c.got_exact, c.got);
        o["expected"] = c.expected_exact.empty() ? nlohmann::json(c.expected) : exact_value(c.expected_exact, c.expected);
      }
    }
    outputs.push_back(o);
  }
  return {{"dir", r.dir}, {"function", r.function}, {"seq", r.seq}, {"result", replay::to_string(r.outcome)},
          {"message", r.message}, {"outputs", outputs}};
}

void add_replay_command(CLI::App& app, int& exit_code) {
  struct Flags {
    std::string dir, filter, guard_mode;
    std::vector<std::string> libs;
    double rtol = -1, atol = -1;
    int device = -1;
    bool exact = false, json = false, guard_alloc = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("replay", "Run dumped API calls (MATE_LOGLEVEL=10) again and compare their outputs");
  cmd->add_option("--dir", f->dir, "A call directory, or a dump root holding call directories (replayed in call order)")
      ->required();
  cmd->add_option("--lib", f->libs, "Shared library that registers the replayable functions (MATE_REPLAYABLE); repeatable");
  cmd->add_option("--filter", f->filter, "Only calls whose function name matches this fnmatch pattern");
  cmd->add_option("--rtol", f->rtol, "Relative tolerance (default per dtype, see docs/dumps-and-replay.md)")
      ->check(tolerance_value());
  cmd->add_option("--atol", f->atol, "Absolute tolerance (default per dtype)")->check(tolerance_value());
  cmd->add_flag("--exact", f->exact, "Compare outputs bit for bit");
  cmd->add_option("--device", f->device,
                  "Replay every CUDA/MUSA tensor on this device ordinal (default: the device it was recorded on)")
      ->check(device_ordinal());
  cmd->add_flag("--json", f->json, "Print the results as JSON");
  cmd->add_flag("--guard-alloc", f->guard_alloc, "Allocate the rebuilt tensors with the guarded allocator");
  cmd->add_option("--guard-mode", f->guard_mode, "Guard placement with --guard-alloc: tail (overruns) or head (underruns)")
      ->check(CLI::IsMember({"tail", "head"}));
  cmd->callback([f, &exit_code] {
    if (!f->guard_mode.empty() && !f->guard_alloc) {
      fmt::print(stderr, "mate replay: --guard-mode needs --guard-alloc\n");
      exit_code = kExitUsage;
      return;
    }
    std::unique_ptr<replay::TensorAllocator> guarded;
    if (f->guard_alloc) {
#ifdef MATE_REPLAY_HAVE_GUARD
      guarded = replay::make_guard_allocator(f->guard_mode.empty() ? "tail" : f->guard_mode);
#else
      fmt::print(stderr, "mate replay: --guard-alloc is not available: this build of mate has no guarded allocator\n");
      exit_code = kExitUsage;
      return;
#endif
    }
    if (f->exact && (f->rtol >= 0 || f->atol >= 0)) {
      fmt::print(stderr, "mate replay: --exact compares bit for bit; it cannot be combined with --rtol or --atol\n");
      exit_code = kExitUsage;
      return;
    }
    for (const std::string& lib : f->libs) {
      // RTLD_GLOBAL: the library's registrations and MATE_API calls bind to this program's MATE.
      if (::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
        const std::string why = ::dlerror();
        // dlopen looks for a bare name on the library path, never in the current directory.
        std::error_code ec;
        const bool here = lib.find('/') == std::string::npos && std::filesystem::exists(lib, ec);
        fmt::print(stderr, "mate replay: cannot load --lib {}: {}{}\n", lib, why,
                   here ? "; a name without '/' is looked for on the library path, not in the current "
                          "directory: --lib ./" + lib
                        : "");
        exit_code = kExitUsage;
        return;
      }
    }
    replay::Options options;
    options.filter = f->filter;
    if (f->rtol >= 0) options.rtol = f->rtol;
    if (f->atol >= 0) options.atol = f->atol;
    options.exact = f->exact;
    if (f->device >= 0) options.device = f->device;
    options.allocator = guarded.get();
    // The replayed calls log as MATE_LOGLEVEL says (capped at 5 by replay: no dumps of the
    // replayed calls), but never onto stdout, which carries the results (and the JSON).
    std::optional<config::ScopedOverride> log_to_stderr;
    if (log::level() > 0 && log_goes_to_stdout()) {
      log_to_stderr.emplace(config::Var::MATE_LOGDEST, "stderr");
      log::reconfigure();
    }
    // Each call is reported as it finishes, and named before it runs: when a replayed call
    // crashes the process, the results so far and the call that crashed are on screen.
    replay::Progress progress;
    std::size_t passed = 0, count = 0;
    nlohmann::json calls = nlohmann::json::array();
    if (f->json) {
      // The JSON is printed whole at the end; stderr names the running call meanwhile.
      progress.starting = [](const std::string& dir, const std::string& function) {
        fmt::print(stderr, "mate replay: replaying {}\n", replay::format_name(dir, function));
        std::fflush(stderr);
      };
    } else {
      progress.starting = [](const std::string& dir, const std::string& function) {
        fmt::print("{}  ", replay::format_name(dir, function));
        std::fflush(stdout);
      };
    }
    progress.finished = [&](const replay::CallResult& r) {
      ++count;
      if (r.outcome == replay::Outcome::Passed) ++passed;
      if (f->json) {
        calls.push_back(to_json(r));
      } else {
        fmt::print("{}\n", replay::format_outcome(r));
        std::fflush(stdout);
      }
    };
    try {
      replay::replay_each(f->dir, options, progress);
    } catch (const dump::DumpError& e) {
      fmt::print(stderr, "mate replay: --dir: {}\n", e.what());
      exit_code = kExitUsage;
      return;
    }
    const std::size_t failed = count - passed;
    // Nothing verified is a failure (exit 1), said on stderr in both output forms.
    if (count == 0)
      fmt::print(stderr,
                 "mate replay: no calls to replay in {}{}: a call is a directory holding call.json, as "
                 "MATE_LOGLEVEL=10 writes them under MATE_DUMP_DIR (docs/dumps-and-replay.md)\n",
                 f->dir, f->filter.empty() ? "" : " matching --filter " + f->filter);
    if (f->json) {
      fmt::print("{}\n", json_text({{"calls", calls}, {"passed", passed}, {"failed", failed}}));
    } else {
      fmt::print("{} passed, {} failed\n", passed, failed);
    }
    exit_code = passed == count && count != 0 ? kExitOk : kExitFailed;
  });
}

}  // namespace

MATE_CLI_COMMAND(30, add_replay_command);

}  // namespace mate::cli
