// `mate replay`: runs dumped API calls again and compares their outputs with the recorded ones.
#include <dlfcn.h>
#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
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

nlohmann::json to_json(const replay::CallResult& r) {
  nlohmann::json outputs = nlohmann::json::array();
  for (const replay::OutputCheck& c : r.outputs) {
    nlohmann::json o = {{"name", c.name}, {"ok", c.ok}, {"count", c.count}, {"mismatched", c.mismatched}};
    if (!c.problem.empty()) o["problem"] = c.problem;
    if (c.problem.empty()) {
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
    bool exact = false, json = false, guard_alloc = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("replay", "Run dumped API calls (MATE_LOGLEVEL=10) again and compare their outputs");
  cmd->add_option("--dir", f->dir, "A call directory, or a dump root holding call directories (replayed in call order)")
      ->required();
  cmd->add_option("--lib", f->libs, "Shared library that registers the replayable functions (MATE_REPLAYABLE); repeatable");
  cmd->add_option("--filter", f->filter, "Only calls whose function name matches this fnmatch pattern");
  cmd->add_option("--rtol", f->rtol, "Relative tolerance (default per dtype, see docs/dumps-and-replay.md)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--atol", f->atol, "Absolute tolerance (default per dtype)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--exact", f->exact, "Compare outputs bit for bit");
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
        fmt::print(stderr, "mate replay: cannot load --lib {}: {}\n", lib, ::dlerror());
        exit_code = kExitUsage;
        return;
      }
    }
    replay::Options options;
    options.filter = f->filter;
    if (f->rtol >= 0) options.rtol = f->rtol;
    if (f->atol >= 0) options.atol = f->atol;
    options.exact = f->exact;
    options.allocator = guarded.get();
    std::vector<replay::CallResult> results;
    try {
      results = replay::replay_all(f->dir, options);
    } catch (const dump::DumpError& e) {
      fmt::print(stderr, "mate replay: --dir: {}\n", e.what());
      exit_code = kExitUsage;
      return;
    }
    std::size_t passed = 0;
    nlohmann::json calls = nlohmann::json::array();
    for (const replay::CallResult& r : results) {
      if (r.outcome == replay::Outcome::Passed) ++passed;
      if (f->json) calls.push_back(to_json(r));
      else fmt::print("{}\n", replay::format_line(r));
    }
    const std::size_t failed = results.size() - passed;
    if (f->json) {
      fmt::print("{}\n", nlohmann::json({{"calls", calls}, {"passed", passed}, {"failed", failed}}).dump(2));
    } else {
      if (results.empty()) fmt::print("no calls to replay in {}{}\n", f->dir, f->filter.empty() ? "" : " matching --filter " + f->filter);
      fmt::print("{} passed, {} failed\n", passed, failed);
    }
    exit_code = passed == results.size() && !results.empty() ? kExitOk : kExitFailed;
  });
}

}  // namespace

MATE_CLI_COMMAND(30, add_replay_command);

}  // namespace mate::cli
