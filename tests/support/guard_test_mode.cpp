// The test suite's guard mode: flags and variables, the self re-execution under the preload, and
// how a process knows it runs guarded.
#include "guard_test_mode.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "mate/config.hpp"
#include "mate/guard/run.hpp"

extern char** environ;

namespace mate::testing {

namespace {

std::string checked_mode(std::string_view value, std::string_view from) {
  if (value == "tail" || value == "head") return std::string(value);
  throw std::invalid_argument(std::string(from) + ": guard mode \"" + std::string(value) +
                              "\" is not accepted; accepted: tail, head");
}

// The file the process's malloc comes from: the preload library when one is in force.
std::string malloc_provider() {
  void* symbol = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

bool listing_tests(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]).rfind("--gtest_list_tests", 0) == 0) return true;
  return false;
}

// Whether `path` names the guard's preload library (by file name: a folder may be called so).
bool is_guard_preload(std::string_view path) {
  return path.substr(path.rfind('/') + 1).rfind("libmate_guard_preload", 0) == 0;
}

}  // namespace

GuardTestOptions take_guard_test_options(int& argc, char** argv) {
  GuardTestOptions options;
  options.guard_alloc = config::pytest_guard_alloc();
  options.mode = config::pytest_guard_mode();
  options.log_allocations = config::pytest_guard_log_allocations();
  options.mode_chosen = config::is_set(config::Var::MATE_PYTEST_GUARD_MODE);
  options.log_allocations_chosen = config::is_set(config::Var::MATE_PYTEST_GUARD_LOG_ALLOCATIONS);
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--guard-alloc") {
      options.guard_alloc = true;
    } else if (arg == "--no-guard-alloc") {
      options.guard_alloc = false;
    } else if (arg == "--guard-log-allocations" || arg == "--no-guard-log-allocations") {
      options.log_allocations = arg == "--guard-log-allocations";
      options.log_allocations_chosen = true;
    } else if (arg == "--guard-mode") {
      if (i + 1 >= argc) throw std::invalid_argument("--guard-mode needs a value: tail or head");
      options.mode = checked_mode(argv[++i], "--guard-mode");
      options.mode_chosen = true;
    } else if (arg.rfind("--guard-mode=", 0) == 0) {
      options.mode = checked_mode(arg.substr(std::strlen("--guard-mode=")), "--guard-mode");
      options.mode_chosen = true;
    } else if (arg.rfind("--guard", 0) == 0 || arg.rfind("--no-guard", 0) == 0) {
      throw std::invalid_argument("unknown flag " + std::string(arg) +
                                  "; accepted: --guard-alloc, --no-guard-alloc, --guard-mode tail|head, "
                                  "--guard-log-allocations, --no-guard-log-allocations");
    } else {
      argv[kept++] = argv[i];
      continue;
    }
  }
  // A listing (ctest's discovery) is the same with or without guard mode; the ctest entries it
  // makes run the program again, with the flags and variables in force then.
  if (listing_tests(kept, argv)) options.guard_alloc = false;
  argv[kept] = nullptr;
  argc = kept;
  return options;
}

bool running_guarded() {
  static const bool guarded = is_guard_preload(malloc_provider()) && config::guard_allocator_auto_install();
  return guarded;
}

void enter_guard_test_mode(const GuardTestOptions& options, char* const* argv) {
  if (running_guarded()) {
    // Already guarded: by our own re-execution, or by `mate guard-run` around the whole run.
    const std::string in_force = config::guard_allocator_mode();
    const bool logging = config::guard_allocator_log_allocations();
    if (options.mode_chosen && in_force != options.mode)
      throw std::runtime_error("this test program already runs under the guarded allocator in " + in_force +
                               " mode (mate guard-run?), but " + options.mode +
                               " mode was asked for (--guard-mode / MATE_PYTEST_GUARD_MODE)");
    if (options.log_allocations_chosen && logging != options.log_allocations)
      throw std::runtime_error(std::string("this test program already runs under the guarded allocator with its "
                                           "allocation log ") + (logging ? "on" : "off") +
                               " (mate guard-run?), but " + (options.log_allocations ? "on" : "off") +
                               " was asked for (--[no-]guard-log-allocations / MATE_PYTEST_GUARD_LOG_ALLOCATIONS)");
    std::fprintf(stderr, "[mate tests] guarded allocator in force: %s mode, allocation log %s\n", in_force.c_str(),
                 logging ? "on" : "off");
    return;
  }
  if (!options.guard_alloc) return;
  if (kSanitizerBuild)
    throw std::runtime_error("guard mode (--guard-alloc / MATE_PYTEST_GUARD_ALLOC=1) needs a build without "
                             "AddressSanitizer or ThreadSanitizer, which own malloc: use the default preset's build");
  if (config::guard_allocator_auto_install())
    throw std::runtime_error("re-executed under the guarded allocator, but its preload library is not in force "
                             "(malloc comes from \"" + malloc_provider() + "\"); was LD_PRELOAD changed?");
  if (access(MATE_TEST_PRELOAD_LIBRARY, R_OK) != 0)
    throw std::runtime_error(std::string("guard mode needs the preload library ") + MATE_TEST_PRELOAD_LIBRARY +
                             ": " + std::strerror(errno) + "; build the mate_guard_preload target");
  guard::GuardRunOptions run_options;
  run_options.mode = options.mode == "head" ? guard::Mode::Head : guard::Mode::Tail;
  run_options.log_allocations = options.log_allocations;
  std::vector<std::string> env = guard::guarded_environment(environ, MATE_TEST_PRELOAD_LIBRARY, run_options);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::fflush(nullptr);
  execve("/proc/self/exe", argv, envp.data());
  throw std::runtime_error(std::string("cannot re-execute this test program under the guarded allocator: ") +
                           std::strerror(errno));
}

}  // namespace mate::testing
