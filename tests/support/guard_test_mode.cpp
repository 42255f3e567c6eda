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

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

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
    if (std::string_view(argv[i]) == "--gtest_list_tests") return true;
  return false;
}

}  // namespace

GuardTestOptions take_guard_test_options(int& argc, char** argv) {
  GuardTestOptions options;
  options.guard_alloc = config::pytest_guard_alloc();
  options.mode = config::pytest_guard_mode();
  options.log_allocations = config::pytest_guard_log_allocations();
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--guard-alloc") {
      options.guard_alloc = true;
    } else if (arg == "--no-guard-alloc") {
      options.guard_alloc = false;
    } else if (arg == "--guard-log-allocations") {
      options.log_allocations = true;
    } else if (arg == "--no-guard-log-allocations") {
      options.log_allocations = false;
    } else if (arg == "--guard-mode") {
      if (i + 1 >= argc) throw std::invalid_argument("--guard-mode needs a value: tail or head");
      options.mode = checked_mode(argv[++i], "--guard-mode");
    } else if (arg.rfind("--guard-mode=", 0) == 0) {
      options.mode = checked_mode(arg.substr(std::strlen("--guard-mode=")), "--guard-mode");
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
  static const bool guarded = malloc_provider().find("libmate_guard_preload") != std::string::npos &&
                              config::guard_allocator_auto_install();
  return guarded;
}

void enter_guard_test_mode(const GuardTestOptions& options, char* const* argv) {
  if (running_guarded()) {
    // Already guarded: by our own re-execution, or by `mate guard-run` around the whole run.
    const std::string in_force = config::guard_allocator_mode();
    if (options.guard_alloc && in_force != options.mode)
      throw std::runtime_error("this test program already runs under the guarded allocator in " + in_force +
                               " mode (mate guard-run?), but " + options.mode +
                               " mode was asked for (--guard-mode / MATE_PYTEST_GUARD_MODE)");
    std::fprintf(stderr, "[mate tests] guarded allocator in force: %s mode, allocation log %s\n", in_force.c_str(),
                 config::guard_allocator_log_allocations() ? "on" : "off");
    return;
  }
  if (!options.guard_alloc) return;
  if (kSanitized)
    throw std::runtime_error("guard mode (--guard-alloc / MATE_PYTEST_GUARD_ALLOC=1) needs a build without "
                             "AddressSanitizer, which owns malloc: use the default preset's build");
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
