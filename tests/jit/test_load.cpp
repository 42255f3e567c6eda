// load_module() in one process: builds with ninja and the host compiler, loads, calls; AOT
// preference and MATE_DISABLE_JIT; build failures; module status; clear-cache; CUDA via nvcc.
#include <dlfcn.h>
#include <sys/stat.h>
#include <utime.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "jit/plan.hpp"
#include "jit/toolchain.hpp"
#include "jit/verify.hpp"
#include "jit_test_support.hpp"
#include "mate/config.hpp"
#include "mate/jit/module_status.hpp"
#include "mate/jit/aot_build.hpp"
#include "mate/jit/clear_cache.hpp"
#include "mate/jit/catalog.hpp"
#include "mate/jit/module.hpp"

// dlopen, interposed for the whole test program (mate::jit is linked statically, so the loader
// calls this one): a test can run code right before the loader's dlopen of a path, to make a
// race deterministic. Without a hook it is the real dlopen.
namespace {
std::function<void(const std::string&)> before_dlopen;
}  // namespace

extern "C" void* dlopen(const char* file, int mode) noexcept {
  using Fn = void* (*)(const char*, int);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "dlopen"));
  if (before_dlopen && file != nullptr) {
    auto hook = std::move(before_dlopen);  // once
    before_dlopen = nullptr;
    hook(file);
  }
  return real(file, mode);
}

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using namespace mate::jit;
using mate::jit::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

bool exists(const std::string& p) { return std::filesystem::exists(p); }

// Each test gets its own workspace, so caches never leak between tests.
struct JitLoad : ::testing::Test {
  TempDir workspace;
  ScopedOverride base{Var::MATE_WORKSPACE_BASE, workspace.path};
  std::string cache_root() const { return workspace.path + "/.cache/mate/" MATE_TEST_VERSION; }
};

using AxpyFn = void(long, float, const float*, float*);

TEST_F(JitLoad, BuildsLoadsAndCallsARenderedHostModule) {
  auto spec = sample_axpy_spec("float", 64);
  Module m = load_module(spec);
  EXPECT_EQ(m.origin(), Origin::JitBuilt);
  EXPECT_EQ(m.name(), "mate_sample_axpy_f32_t64");
  EXPECT_EQ(m.path(), cache_root() + "/" + detail::host_arch() + "/cached_ops/mate_sample_axpy_f32_t64/" +
                          m.key() + "/module.so");
  EXPECT_TRUE(exists(cache_root() + "/" + detail::host_arch() + "/cached_ops/mate_sample_axpy_f32_t64/" + m.key() +
                     "/manifest.json"));
  float x[130], y[130];
  for (int i = 0; i < 130; ++i) x[i] = 1.0f * i, y[i] = 0.5f;
  m.function<AxpyFn>("mate_sample_axpy")(130, 3.0f, x, y);
  EXPECT_FLOAT_EQ(y[129], 0.5f + 3.0f * 129);
  EXPECT_EQ(m.function<long()>("mate_sample_axpy_tile")(), 64) << "the tile parameter was rendered";
  EXPECT_EQ(load_module(sample_axpy_spec("float", 32)).function<long()>("mate_sample_axpy_tile")(), 32);

  Module again = load_module(spec);
  EXPECT_EQ(again.path(), m.path());
  EXPECT_EQ(again.symbol("mate_sample_axpy"), m.symbol("mate_sample_axpy"));
  try {
    m.symbol("no_such_symbol");
    FAIL();
  } catch (const ModuleError& e) {
    EXPECT_EQ(e.kind(), ModuleError::Kind::LoadFailed);
    EXPECT_THAT(e.what(), HasSubstr("module 'mate_sample_axpy_f32_t64'"));
    EXPECT_THAT(e.what(), HasSubstr("no symbol 'no_such_symbol'"));
  }
}

// A toolchain whose C++ runtime is static (here: -static-libstdc++ through MATE_EXTRA_LDFLAGS)
// puts a copy into the module; the module must not export it (docs/gpu-results.md: an exported
// copy's process-wide symbols took over those of a libstdc++.so loaded after it).
TEST_F(JitLoad, AStaticCppRuntimeInAModuleIsNotExported) {
  ScopedOverride ldflags{Var::MATE_EXTRA_LDFLAGS, "-static-libstdc++"};
  ModuleSpec spec{.name = "mate_test_static_runtime",
                  .sources = {{"runtime.cpp", R"(#include <sstream>
#include <stdexcept>
#include <string>
#include "mate/jit/module_abi.h"
MATE_MODULE_EXPORT int mate_test_parse(const char* text) {
  try {
    std::istringstream in(text);
    int v = 0;
    if (!(in >> v)) throw std::invalid_argument(std::string("not a number: ") + text);
    return v;
  } catch (const std::exception&) {
    return -1;
  }
}
)"}}};
  Module m = load_module(spec);
  // The module must carry the runtime (not list libstdc++.so), or there is nothing to check.
  if (FILE* readelf = popen(("readelf -d '" + m.path() + "' 2>/dev/null").c_str(), "r")) {
    std::string needed;
    char line[512];
    while (fgets(line, sizeof line, readelf) != nullptr) needed += line;
    pclose(readelf);
    ASSERT_THAT(needed, HasSubstr("(NEEDED)")) << "readelf did not run";
    if (needed.find("libstdc++") != std::string::npos) GTEST_SKIP() << "this compiler ignored -static-libstdc++";
  }
  EXPECT_EQ(m.function<int(const char*)>("mate_test_parse")("41"), 41);
  EXPECT_EQ(m.function<int(const char*)>("mate_test_parse")("x"), -1);
  void* handle = dlopen(m.path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  for (const char* name : {"__cxa_throw", "__gxx_personality_v0", "_ZNSt6locale7classicEv", "_ZNSt7collateIcE2idE"}) {
    // Found through the module's handle means exported by it or by one of its dependencies; only
    // a definition inside the module itself is wrong.
    if (void* sym = dlsym(handle, name)) {
      Dl_info info{};
      ASSERT_NE(dladdr(sym, &info), 0) << name;
      EXPECT_NE(std::filesystem::path(info.dli_fname), std::filesystem::path(m.path())) << name << " is exported by the module";
    }
  }
  dlclose(handle);
}

TEST_F(JitLoad, BuildFailureShowsTheFailingCommandAndTheFullOutput) {
  ModuleSpec spec{.name = "broken", .sources = {{"broken.cpp", "int f( {\n"}}};
  try {
    load_module(spec);
    FAIL() << "expected a build failure";
  } catch (const ModuleError& e) {
    EXPECT_EQ(e.kind(), ModuleError::Kind::BuildFailed);
    std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("building module 'broken'"));
    EXPECT_THAT(what, HasSubstr("failing command:\n  "));
    EXPECT_THAT(what, HasSubstr("-c src/broken.cpp -o obj/broken.cpp.o"));
    EXPECT_THAT(what, HasSubstr("build output:\n"));
    EXPECT_THAT(what, HasSubstr("error:")) << "the compiler's own message";
  }
  // Nothing was published: a fixed spec of the same name builds.
  ModuleSpec fixed{.name = "broken", .sources = {{"broken.cpp", "#include \"mate/jit/module_abi.h\"\nMATE_MODULE_EXPORT int f() { return 7; }\n"}}};
  EXPECT_EQ(load_module(fixed).function<int()>("f")(), 7);
}

TEST_F(JitLoad, MatchingAotModuleIsPreferredOverTheJitCache) {
  TempDir aot;
  auto spec = sample_axpy_spec("float", 64);
  auto results = build_aot({spec}, aot.path);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].built) << results[0].skipped_reason;
  add_aot_directory(aot.path);
  Module m = load_module(spec);
  EXPECT_EQ(m.origin(), Origin::Aot);
  EXPECT_THAT(m.path(), StartsWith(aot.path + "/"));
  EXPECT_FALSE(exists(cache_root() + "/" + detail::host_arch())) << "no JIT build happened";
  EXPECT_EQ(module_status(spec).state, ModuleState::Aot);

  // Different inputs (extra flags) do not match the AOT module: the JIT builds.
  ScopedOverride flags(Var::MATE_EXTRA_CFLAGS, "-DDIFFERENT=1");
  Module other = load_module(spec);
  EXPECT_EQ(other.origin(), Origin::JitBuilt);
}

TEST_F(JitLoad, DisableJitLoadsAMatchingAotModule) {
  TempDir aot;
  auto spec = sample_axpy_spec("double", 32);
  ASSERT_TRUE(build_aot({spec}, aot.path).at(0).built);
  add_aot_directory(aot.path);
  ScopedOverride off(Var::MATE_DISABLE_JIT, "1");
  EXPECT_EQ(load_module(spec).origin(), Origin::Aot);
}

TEST_F(JitLoad, DisableJitWithoutAotIsAnErrorNamingModuleKeyArchAndEveryPlaceSearched) {
  TempDir aot;
  ASSERT_TRUE(build_aot({sample_axpy_spec("float", 64)}, aot.path).at(0).built);
  add_aot_directory(aot.path);
  ScopedOverride off(Var::MATE_DISABLE_JIT, "1");
  auto spec = sample_axpy_spec("float", 16);  // not in the AOT root
  std::string key = detail::make_plan(spec, "").key;
  try {
    load_module(spec);
    FAIL() << "expected an error";
  } catch (const ModuleError& e) {
    EXPECT_EQ(e.kind(), ModuleError::Kind::Missing);
    std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("module 'mate_sample_axpy_f32_t16' is missing: MATE_DISABLE_JIT=1"));
    EXPECT_THAT(what, HasSubstr("  module: mate_sample_axpy_f32_t16 (host)\n"));
    EXPECT_THAT(what, HasSubstr("  key: " + key + "\n"));
    EXPECT_THAT(what, HasSubstr("  arch: " + detail::host_arch() + "\n"));
    EXPECT_THAT(what, HasSubstr("    " + aot.path + " (AOT root: module not in manifest.json)"));
    for (const auto& dir : aot_directories()) EXPECT_THAT(what, HasSubstr(dir));
  }
  EXPECT_FALSE(exists(cache_root() + "/" + detail::host_arch())) << "nothing was built";
}

TEST_F(JitLoad, DisableJitWithoutArchListNamesModuleWhyThereIsNoKeyArchAndEveryPlaceSearched) {
  TempDir aot;
  ASSERT_TRUE(build_aot({sample_axpy_spec("float", 64)}, aot.path).at(0).built);
  add_aot_directory(aot.path);
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, std::nullopt);
  mate::jit::testing::NoVisibleDevices no_devices;
  ScopedOverride off(Var::MATE_DISABLE_JIT, "1");
  try {
    load_module(sample_cuda_scale_spec());
    FAIL() << "expected an error";
  } catch (const ModuleError& e) {
    EXPECT_EQ(e.kind(), ModuleError::Kind::Missing);
    std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("module 'mate_sample_scale_cuda' is missing: MATE_DISABLE_JIT=1"));
    EXPECT_THAT(what, HasSubstr("  module: mate_sample_scale_cuda (cuda)\n"));
    EXPECT_THAT(what, HasSubstr("  key: none: a key needs the arch list, and no CUDA arch list: "
                                "MATE_CUDA_ARCH_LIST is unset"));
    EXPECT_THAT(what, HasSubstr("  arch: unknown"));
    EXPECT_THAT(what, HasSubstr("    " + aot.path + " (AOT root: module not in manifest.json)"));
    for (const auto& dir : aot_directories()) EXPECT_THAT(what, HasSubstr("    " + dir + " (AOT root: "));
  }
}

TEST_F(JitLoad, StatusGoesFromMissingToCachedToStaleNamingTheFirstDifferentInput) {
  auto spec = sample_axpy_spec("float", 8);
  ModuleStatus s = module_status(spec, "tests");
  EXPECT_EQ(s.state, ModuleState::Missing);
  EXPECT_EQ(s.key.size(), 32u);
  load_module(spec);
  s = module_status(spec, "tests");
  EXPECT_EQ(s.state, ModuleState::JitCached);
  EXPECT_GT(s.size, 0u);
  EXPECT_FALSE(s.built_at.empty());
  EXPECT_TRUE(exists(s.path));
  ScopedOverride flags(Var::MATE_EXTRA_CFLAGS, "-DNEW_FLAG");
  s = module_status(spec, "tests");
  EXPECT_EQ(s.state, ModuleState::Stale);
  EXPECT_THAT(s.detail, HasSubstr("MATE_EXTRA_CFLAGS differs (cached: (empty); now: -DNEW_FLAG)"));
}

TEST_F(JitLoad, ClearCacheRemovesTheCacheWhileLoadedModulesKeepWorking) {
  // A tile no other test builds ahead of time: the AOT roots other tests added stay known to
  // this process, and their loaded libraries stay mapped.
  Module m = load_module(sample_axpy_spec("float", 40));
  ASSERT_EQ(m.origin(), Origin::JitBuilt);
  ClearResult r = clear_cache(false);
  EXPECT_TRUE(r.existed);
  EXPECT_EQ(r.path, cache_root());
  EXPECT_GT(r.bytes, 0u);
  EXPECT_FALSE(exists(cache_root()));
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  m.function<AxpyFn>("mate_sample_axpy")(4, 1.0f, x, y);
  EXPECT_EQ(y[3], 4.0f) << "a loaded module outlives its files";
  EXPECT_FALSE(clear_cache(false).existed);
}

TEST_F(JitLoad, LibraryWhoseDependencyIsNotFoundIsLoadFailedAndTheEntryIsKept) {
  // An environment problem (a runtime library not on the search path), not a corrupt entry:
  // the entry must be left alone, never set aside and rebuilt.
  std::string cxx = mate::jit::testing::write_compiler_wrapper(workspace.path);
  ScopedOverride o(Var::CXX, cxx);
  TempDir libdir;
  ModuleSpec dep{.name = "mate_test_dep",
                 .sources = {{"dep.cpp", "#include \"mate/jit/module_abi.h\"\n"
                                         "MATE_MODULE_EXPORT int mate_test_dep_value() { return 41; }\n"}},
                 .ldflags = {"-Wl,-soname,libmate_test_dep.so"}};
  // Built but not loaded here: once loaded, its soname would satisfy the dependency.
  auto built = build_aot({dep}, libdir.path + "/aot");
  ASSERT_TRUE(built.at(0).built) << built.at(0).skipped_reason;
  std::filesystem::copy_file(built.at(0).path, libdir.path + "/libmate_test_dep.so");
  ModuleSpec user{.name = "mate_test_dep_user",
                  .sources = {{"user.cpp", "#include \"mate/jit/module_abi.h\"\n"
                                           "MATE_MODULE_EXPORT int mate_test_dep_value();\n"
                                           "MATE_MODULE_EXPORT int answer() { return mate_test_dep_value() + 1; }\n"}},
                  .ldflags = {"-L" + libdir.path, "-lmate_test_dep"}};
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      load_module(user);
      FAIL() << "expected a load failure (attempt " << attempt << ")";
    } catch (const ModuleError& e) {
      EXPECT_EQ(e.kind(), ModuleError::Kind::LoadFailed);
      EXPECT_THAT(e.what(), HasSubstr("libmate_test_dep.so"));
    }
  }
  ModuleStatus s = module_status(user);
  EXPECT_EQ(s.state, ModuleState::JitCached) << "the entry is intact: " << s.detail;
  std::string module_dir = std::filesystem::path(s.path).parent_path().parent_path().string();
  for (auto& e : std::filesystem::directory_iterator(module_dir))
    EXPECT_EQ(e.path().filename().string().rfind(".corrupt-", 0), std::string::npos) << e.path();
  std::string log = mate::jit::testing::read_file(workspace.path + "/cxx.log");
  EXPECT_EQ(mate::jit::testing::count_lines_with(log, " -c src/user.cpp"), 1) << "built once, never rebuilt";

  // Once the dependency can be found, the same entry loads.
  void* dep_handle = dlopen((libdir.path + "/libmate_test_dep.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(dep_handle, nullptr) << dlerror();
  Module m = load_module(user);
  EXPECT_EQ(m.origin(), Origin::JitCache);
  EXPECT_EQ(m.function<int()>("answer")(), 42);
}

TEST_F(JitLoad, CompilerTouchedInPlaceIsAskedAgainButKeepsTheKey) {
  std::string cxx = mate::jit::testing::write_compiler_wrapper(workspace.path);
  ScopedOverride o(Var::CXX, cxx);
  std::string memo = workspace.path + "/memo";
  std::string k1 = detail::make_plan(sample_axpy_spec("float", 64), memo).key;
  std::string k2 = detail::make_plan(sample_axpy_spec("float", 64), memo).key;
  EXPECT_EQ(k1, k2);
  std::string log = mate::jit::testing::read_file(workspace.path + "/cxx.log");
  EXPECT_EQ(mate::jit::testing::count_lines_with(log, "--version"), 1) << "remembered";
  struct utimbuf times {1000000, 1000000};
  ASSERT_EQ(utime(cxx.c_str(), &times), 0);
  EXPECT_EQ(detail::make_plan(sample_axpy_spec("float", 64), memo).key, k1) << "mtime is not identity";
  log = mate::jit::testing::read_file(workspace.path + "/cxx.log");
  EXPECT_EQ(mate::jit::testing::count_lines_with(log, "--version"), 2) << "memo invalidated by the touch";
}

// A program that exists and is executable but cannot be started (here: a script whose
// interpreter is missing) is a ModuleError, not a std::system_error escaping load_module.
std::string write_unstartable(const std::string& path) {
  { std::ofstream(path) << "#!/nonexistent/interpreter\n"; }
  chmod(path.c_str(), 0755);
  return path;
}

TEST_F(JitLoad, CompilerThatCannotBeStartedIsNotBuildable) {
  std::string bad = write_unstartable(workspace.path + "/bad-c++");
  ScopedOverride o(Var::CXX, bad);
  try {
    load_module(sample_axpy_spec("float", 64));
    FAIL() << "expected an error";
  } catch (const ModuleError& e) {
    EXPECT_EQ(e.kind(), ModuleError::Kind::NotBuildable);
    EXPECT_THAT(e.what(), HasSubstr("compiler " + bad + " cannot be run: No such file or directory"));
  }
  EXPECT_EQ(module_status(sample_axpy_spec("float", 64)).state, ModuleState::NotBuildable);
}

TEST_F(JitLoad, NinjaThatCannotBeStartedIsNotBuildable) {
  TempDir bin;
  std::string ninja = write_unstartable(bin.path + "/ninja");
  ScopedOverride cxx(Var::CXX, "/usr/bin/c++");
  ScopedOverride path(Var::PATH, bin.path);
  try {
    load_module(sample_axpy_spec("float", 24));  // in no AOT root of this process
    FAIL() << "expected an error";
  } catch (const ModuleError& e) {
    EXPECT_EQ(e.kind(), ModuleError::Kind::NotBuildable);
    EXPECT_THAT(e.what(), HasSubstr("cannot build module 'mate_sample_axpy_f32_t24': " + ninja));
  }
}

TEST_F(JitLoad, DeviceModuleWithoutArchListIsNotBuildableNotACrash) {
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, std::nullopt);
  mate::jit::testing::NoVisibleDevices no_devices;
  try {
    load_module(sample_cuda_scale_spec());
    FAIL() << "expected an error";
  } catch (const ModuleError& e) {
    EXPECT_EQ(e.kind(), ModuleError::Kind::NotBuildable);
    EXPECT_THAT(e.what(), HasSubstr("module 'mate_sample_scale_cuda' (cuda) cannot be resolved: no CUDA arch list"));
  }
  ModuleStatus s = module_status(sample_cuda_scale_spec());
  EXPECT_EQ(s.state, ModuleState::NotBuildable);
  EXPECT_THAT(s.detail, HasSubstr("MATE_CUDA_ARCH_LIST is unset"));
}

TEST_F(JitLoad, CudaModuleBuildsWithNvccForArch90) {
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, "9.0");
  auto plan = detail::make_plan(sample_cuda_scale_spec(), "");
  if (!plan.buildable) GTEST_SKIP() << "nvcc not available: " << plan.why_not_buildable;
  auto start = std::chrono::steady_clock::now();
  std::optional<Module> loaded;
  try {
    loaded = load_module(sample_cuda_scale_spec());
  } catch (const ModuleError& e) {
    // Without a GPU driver, dlopen of a CUDA module can still fail on some systems; the
    // build itself is what this test checks.
    if (e.kind() != ModuleError::Kind::LoadFailed) throw;
    GTEST_SKIP() << e.what();
  }
  const Module& m = *loaded;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(m.origin(), Origin::JitBuilt);
  EXPECT_THAT(m.path(), HasSubstr("/cuda_9.0/cached_ops/mate_sample_scale_cuda/"));
  EXPECT_NE(m.symbol("mate_sample_scale"), nullptr);
  EXPECT_LT(seconds, 60.0);
  std::printf("nvcc build of mate_sample_scale_cuda for 9.0: %.2f s\n", seconds);
}

// An AOT module is built by the packager's compiler: another compiler here (another version)
// must not hide it, with or without MATE_DISABLE_JIT.
TEST_F(JitLoad, AotModuleIsUsedWhateverCompilerIsInstalledHere) {
  TempDir aot;
  auto spec = sample_axpy_spec("float", 56);
  ASSERT_TRUE(build_aot({spec}, aot.path).at(0).built);
  add_aot_directory(aot.path);
  std::string other = workspace.path + "/other-c++";
  {
    std::ofstream out(other);
    out << "#!/bin/sh\ncase \" $* \" in *' --version '*) echo 'other compiler 99.1'; exit 0;; esac\n"
        << "exec /usr/bin/c++ \"$@\"\n";
  }
  ASSERT_EQ(chmod(other.c_str(), 0755), 0);
  ScopedOverride cxx(Var::CXX, other);
  EXPECT_EQ(module_status(spec).state, ModuleState::Aot) << module_status(spec).detail;
  ScopedOverride off(Var::MATE_DISABLE_JIT, "1");
  Module m = load_module(spec);
  EXPECT_EQ(m.origin(), Origin::Aot);
  EXPECT_EQ(module_status(spec).state, ModuleState::Aot);
}

// Copies a module built into an AOT directory into the JIT cache, as if it had been built there
// (a load would keep it in this process's memory and never look at the disk again).
std::string seed_cache_entry(const ModuleSpec& spec, const std::string& cache_root) {
  TempDir out;
  auto built = build_aot({spec}, out.path);
  std::filesystem::path lib(built.at(0).path);
  auto plan = detail::make_plan(spec, "");
  std::string entry = cache_root + "/" + plan.arch + "/cached_ops/" + spec.name + "/" + plan.key;
  std::filesystem::create_directories(std::filesystem::path(entry).parent_path());
  std::filesystem::copy(lib.parent_path(), entry, std::filesystem::copy_options::recursive);
  return entry;
}

TEST_F(JitLoad, WarmHitWhoseEntryIsClearedBeforeTheDlopenBuildsAgain) {
  auto spec = sample_axpy_spec("float", 72);
  std::string entry = seed_cache_entry(spec, cache_root());
  ASSERT_EQ(module_status(spec).state, ModuleState::JitCached);
  // `mate clear-cache` between the loader's check of the entry and its dlopen.
  before_dlopen = [&](const std::string& path) {
    if (path.rfind(entry, 0) == 0) clear_cache(false);
  };
  Module m = load_module(spec);
  before_dlopen = nullptr;
  EXPECT_EQ(m.origin(), Origin::JitBuilt);
  EXPECT_EQ(m.path(), entry + "/module.so");
  EXPECT_TRUE(exists(m.path()));
}

TEST_F(JitLoad, StatusShowsWhatTheLoaderDoesWithJitDisabled) {
  auto spec = sample_axpy_spec("float", 80);
  seed_cache_entry(spec, cache_root());
  ASSERT_EQ(module_status(spec).state, ModuleState::JitCached);
  ScopedOverride off(Var::MATE_DISABLE_JIT, "1");
  ModuleStatus s = module_status(spec);
  EXPECT_EQ(s.state, ModuleState::Missing) << "the loader does not use the JIT cache then";
  EXPECT_THAT(s.detail, HasSubstr("MATE_DISABLE_JIT=1 and no matching AOT module"));
  EXPECT_THROW(load_module(spec), ModuleError);
}

TEST_F(JitLoad, StatusJudgesADamagedEntryAsTheLoaderDoes) {
  auto spec = sample_axpy_spec("float", 88);
  std::string lib = seed_cache_entry(spec, cache_root()) + "/module.so";
  auto size = std::filesystem::file_size(lib);
  ASSERT_TRUE(mate::jit::testing::corrupt_code(lib));  // same size, same ELF header
  ModuleStatus s = module_status(spec);
  EXPECT_EQ(s.state, ModuleState::Corrupt);
  EXPECT_EQ(to_string(s.state), "corrupt");
  EXPECT_THAT(s.detail, HasSubstr("module.so does not match the content hash manifest.json recorded"));
  EXPECT_THAT(s.detail, HasSubstr("sets it aside as "));
  std::filesystem::resize_file(lib, size / 2);  // still starts with the ELF magic
  s = module_status(spec);
  EXPECT_EQ(s.state, ModuleState::Corrupt);
  EXPECT_THAT(s.detail, HasSubstr("module.so has " + std::to_string(size / 2) + " bytes but manifest.json recorded"));
  { std::ofstream(lib, std::ios::trunc) << "not an ELF file"; }
  EXPECT_THAT(module_status(spec).detail, HasSubstr("module.so is not an ELF shared library"));
}

// An entry whose manifest has no content hash (written before MATE recorded them) cannot be
// checked: it is rebuilt rather than trusted.
TEST_F(JitLoad, EntryWithoutARecordedContentHashIsCorrupt) {
  auto spec = sample_axpy_spec("float", 96);
  std::string entry = seed_cache_entry(spec, cache_root());
  auto manifest = nlohmann::json::parse(mate::jit::testing::read_file(entry + "/manifest.json"));
  ASSERT_EQ(manifest["library_xxh3_128"].get<std::string>().size(), 32u);
  manifest.erase("library_xxh3_128");
  { std::ofstream(entry + "/manifest.json", std::ios::trunc) << manifest.dump(); }
  ModuleStatus s = module_status(spec);
  EXPECT_EQ(s.state, ModuleState::Corrupt);
  EXPECT_THAT(s.detail, HasSubstr("manifest.json records no content hash of module.so"));
  Module m = load_module(spec);
  EXPECT_EQ(m.origin(), Origin::JitBuilt);
  EXPECT_EQ(module_status(spec).state, ModuleState::JitCached);
}

// An AOT module whose code was damaged in place (same size) is passed over: the JIT builds.
TEST_F(JitLoad, AotModuleWithCorruptedCodeFallsBackToTheJit) {
  TempDir aot;
  auto spec = sample_axpy_spec("float", 120);
  auto built = build_aot({spec}, aot.path);
  ASSERT_TRUE(built.at(0).built) << built.at(0).skipped_reason;
  ASSERT_TRUE(mate::jit::testing::corrupt_code(built.at(0).path));
  add_aot_directory(aot.path);
  ModuleStatus s = module_status(spec);
  EXPECT_EQ(s.state, ModuleState::Missing) << s.detail;
  EXPECT_THAT(s.detail, HasSubstr("AOT module " + std::filesystem::path(built.at(0).path).parent_path().string()));
  EXPECT_THAT(s.detail, HasSubstr("does not match the content hash"));
  ::testing::internal::CaptureStderr();
  Module m = load_module(spec);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(m.origin(), Origin::JitBuilt) << "the damaged AOT module must not be loaded (calling it would trap)";
  EXPECT_EQ(mate::jit::testing::count_lines_with(err, "mate: module 'mate_sample_axpy_f32_t120': AOT module "), 1) << err;
  EXPECT_THAT(err, HasSubstr("left in place and not used (the JIT cache is used instead)"));
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  m.function<AxpyFn>("mate_sample_axpy")(4, 2.0f, x, y);
  EXPECT_EQ(y[3], 8.0f);
  EXPECT_TRUE(exists(built.at(0).path)) << "the AOT module is left in place";
}

// A damaged AOT module, or one that cannot be loaded, gives way to a good one in a later root.
TEST_F(JitLoad, UnusableAotModuleGivesWayToALaterRoot) {
  auto empty_spec = sample_axpy_spec("float", 104);
  auto garbage_spec = sample_axpy_spec("double", 104);
  TempDir first, second;
  auto a = build_aot({empty_spec, garbage_spec}, first.path);
  ASSERT_TRUE(build_aot({empty_spec, garbage_spec}, second.path).at(1).built);
  // The first module's library emptied; the second's replaced by a sound-looking but unloadable
  // one of the size its manifest records.
  { std::ofstream(a.at(0).path, std::ios::trunc); }
  std::string garbage(4096, '\0');
  garbage.replace(0, 4, "\x7f" "ELF");
  { std::ofstream(a.at(1).path, std::ios::trunc | std::ios::binary) << garbage; }
  std::string manifest_path = std::filesystem::path(a.at(1).path).parent_path().string() + "/manifest.json";
  auto manifest = nlohmann::json::parse(mate::jit::testing::read_file(manifest_path));
  manifest["size"] = garbage.size();
  { std::ofstream(manifest_path, std::ios::trunc) << manifest.dump(); }
  add_aot_directory(first.path);
  add_aot_directory(second.path);

  ModuleStatus s = module_status(empty_spec);
  EXPECT_EQ(s.state, ModuleState::Aot);
  EXPECT_THAT(s.path, StartsWith(second.path + "/"));
  Module m = load_module(empty_spec);
  EXPECT_EQ(m.origin(), Origin::Aot);
  EXPECT_THAT(m.path(), StartsWith(second.path + "/"));
  Module g = load_module(garbage_spec);
  EXPECT_EQ(g.origin(), Origin::Aot);
  EXPECT_THAT(g.path(), StartsWith(second.path + "/"));
  EXPECT_FALSE(exists(cache_root() + "/" + detail::host_arch())) << "nothing was built";
}

// An invalid MAX_JOBS or MATE_JIT_VERBOSE is refused before a build directory exists.
TEST_F(JitLoad, InvalidBuildVariablesLeaveNoBuildDirectory) {
  auto spec = sample_axpy_spec("float", 112);
  for (auto [var, value] : {std::pair{Var::MAX_JOBS, "0"}, std::pair{Var::MATE_JIT_VERBOSE, "maybe"}}) {
    ScopedOverride bad(var, value);
    EXPECT_THROW(load_module(spec), mate::config::ConfigError);
  }
  std::string module_dir = cache_root() + "/" + detail::host_arch() + "/cached_ops/" + spec.name;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(module_dir, ec))
    EXPECT_EQ(e.path().filename().string().rfind(".staging-", 0), std::string::npos) << e.path();
}

// CXX is nvcc's host compiler (-ccbin): nvcc runs it.
TEST_F(JitLoad, CudaBuildCompilesHostCodeWithCxx) {
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, "9.0");
  std::string cxx = mate::jit::testing::write_compiler_wrapper(workspace.path);
  ScopedOverride o(Var::CXX, cxx);
  auto plan = detail::make_plan(sample_cuda_scale_spec(), "");
  if (!plan.buildable) GTEST_SKIP() << "nvcc not available: " << plan.why_not_buildable;
  try {
    load_module(sample_cuda_scale_spec());
  } catch (const ModuleError& e) {
    if (e.kind() != ModuleError::Kind::LoadFailed) throw;  // no GPU driver: the build is what counts
  }
  std::string log = mate::jit::testing::read_file(workspace.path + "/cxx.log");
  EXPECT_GE(mate::jit::testing::count_lines_with(log, "scale"), 1) << "nvcc ran CXX on the module's host code:\n"
                                                                     << log;
}

// The arch list is part of the cache directory: an entry built for another list is stale, and
// says so, rather than the module looking never built.
TEST_F(JitLoad, EntryBuiltForAnotherArchListIsStaleNamingTargetArch) {
  std::optional<ScopedOverride> list;
  list.emplace(Var::MATE_CUDA_ARCH_LIST, "9.0");
  auto plan = detail::make_plan(sample_cuda_scale_spec(), "");
  if (!plan.buildable) GTEST_SKIP() << "nvcc not available: " << plan.why_not_buildable;
  try {
    load_module(sample_cuda_scale_spec());
  } catch (const ModuleError& e) {
    if (e.kind() != ModuleError::Kind::LoadFailed) throw;
  }
  ASSERT_EQ(module_status(sample_cuda_scale_spec()).state, ModuleState::JitCached);
  list.emplace(Var::MATE_CUDA_ARCH_LIST, "8.0 9.0");
  ModuleStatus s = module_status(sample_cuda_scale_spec());
  EXPECT_EQ(s.state, ModuleState::Stale);
  EXPECT_THAT(s.detail, HasSubstr("target_arch differs (cached: 9.0; now: 8.0 9.0)"));
}

// A library whose verified stamp says it has not changed since its hash last matched is not
// hashed again (status and loads alike); `--verify` hashes anyway. A same-size change with its
// mtime put back still moves ctime: hashed, found damaged, and its stamp removed.
TEST_F(JitLoad, StampedLibraryIsHashedOnlyAfterItChanged) {
  auto spec = sample_axpy_spec("float", 128);
  const std::string entry = seed_cache_entry(spec, cache_root());
  const std::string lib = entry + "/module.so", stamp = entry + "/verified.json";
  ASSERT_FALSE(exists(stamp)) << "an AOT build (copied here) writes no stamp beside its module";
  mate::jit::testing::wait_past_file_clock_tick();
  const auto hashed = detail::libraries_hashed();
  EXPECT_EQ(module_status(spec).state, ModuleState::JitCached);
  EXPECT_EQ(detail::libraries_hashed(), hashed + 1) << "no stamp: hashed";
  EXPECT_FALSE(exists(stamp)) << "a status query writes no stamp";
  Module m = load_module(spec);
  EXPECT_EQ(m.origin(), Origin::JitCache);
  EXPECT_EQ(detail::libraries_hashed(), hashed + 2);
  ASSERT_TRUE(exists(stamp)) << "the load's hash matched: stamped";
  EXPECT_THAT(mate::jit::testing::read_file(stamp), HasSubstr("\"library\":\"module.so\""));
  EXPECT_EQ(module_status(spec).state, ModuleState::JitCached);
  EXPECT_EQ(detail::libraries_hashed(), hashed + 2) << "stamped and unchanged: not hashed";
  EXPECT_EQ(module_status(spec, "", {.verify = true}).state, ModuleState::JitCached);
  EXPECT_EQ(detail::libraries_hashed(), hashed + 3) << "--verify hashes whatever the stamp says";

  ASSERT_TRUE(mate::jit::testing::change_last_byte_keeping_mtime(lib));
  ModuleStatus s = module_status(spec);
  EXPECT_EQ(detail::libraries_hashed(), hashed + 4) << "ctime moved: hashed";
  EXPECT_EQ(s.state, ModuleState::Corrupt);
  EXPECT_THAT(s.detail, HasSubstr("module.so does not match the content hash manifest.json recorded"));
  EXPECT_FALSE(exists(stamp)) << "a library found damaged loses its stamp";
}

// A stamp that is not one (garbage, empty, for another file or hash, or naming another library)
// is ignored: the library is hashed, and a load writes the stamp again.
TEST_F(JitLoad, DamagedOrStaleStampIsIgnoredAndWrittenAgain) {
  const std::vector<std::pair<std::string, std::function<std::string(const std::string&)>>> damages{
      {"garbage", [](const std::string&) { return std::string("\x01\x02 not json"); }},
      {"empty", [](const std::string&) { return std::string(); }},
      {"cut short", [](const std::string& good) { return good.substr(0, good.size() / 2); }},
      {"another inode",
       [](const std::string& good) {
         auto j = nlohmann::json::parse(good);
         j["ino"] = j["ino"].get<std::uint64_t>() + 1;
         return j.dump();
       }},
      {"another hash",
       [](const std::string& good) {
         auto j = nlohmann::json::parse(good);
         j["library_xxh3_128"] = std::string(32, '0');
         return j.dump();
       }},
      {"another library",
       [](const std::string& good) {
         auto j = nlohmann::json::parse(good);
         j["library"] = "other.so";
         return j.dump();
       }},
      {"a field of another type",
       [](const std::string& good) {
         auto j = nlohmann::json::parse(good);
         j["ctime_ns"] = "yesterday";
         return j.dump();
       }},
  };
  int salt = 160;
  for (const auto& [what, damage] : damages) {
    SCOPED_TRACE(what);
    auto spec = sample_axpy_spec("float", salt++);  // a fresh module: a load in this process is remembered
    const std::string entry = seed_cache_entry(spec, cache_root());
    const std::string stamp = entry + "/verified.json";
    mate::jit::testing::wait_past_file_clock_tick();
    // A good stamp, written by the check a load does (a load itself would be remembered).
    {
      detail::Manifest m;
      ASSERT_EQ(detail::check_entry(entry, detail::make_plan(spec, ""), &m), "");
    }
    ASSERT_TRUE(exists(stamp));
    const std::string good = mate::jit::testing::read_file(stamp);
    { std::ofstream(stamp, std::ios::trunc | std::ios::binary) << damage(good); }
    const auto hashed = detail::libraries_hashed();
    EXPECT_EQ(module_status(spec).state, ModuleState::JitCached);
    EXPECT_EQ(detail::libraries_hashed(), hashed + 1) << "the stamp does not vouch: hashed";
    Module m = load_module(spec);
    EXPECT_EQ(m.origin(), Origin::JitCache);
    EXPECT_EQ(mate::jit::testing::read_file(stamp), good) << "written again";
    EXPECT_EQ(module_status(spec).state, ModuleState::JitCached);
    EXPECT_EQ(detail::libraries_hashed(), hashed + 2) << "stamped again: not hashed";
  }
}

// AOT installs may be read-only: their stamps are kept in the JIT cache, keyed by the library's
// path, and vouch for them as for cache entries.
TEST_F(JitLoad, AotModuleIsStampedInTheJitCacheAndHashedOnlyAfterItChanged) {
  TempDir aot;
  auto spec = sample_axpy_spec("float", 136);
  auto built = build_aot({spec}, aot.path);
  ASSERT_TRUE(built.at(0).built) << built.at(0).skipped_reason;
  EXPECT_FALSE(exists(std::filesystem::path(built.at(0).path).parent_path() / "verified.json"));
  add_aot_directory(aot.path);
  mate::jit::testing::wait_past_file_clock_tick();
  const auto hashed = detail::libraries_hashed();
  Module m = load_module(spec);
  EXPECT_EQ(m.origin(), Origin::Aot);
  EXPECT_EQ(detail::libraries_hashed(), hashed + 1);
  std::vector<std::string> stamps;
  for (const auto& e : std::filesystem::directory_iterator(cache_root() + "/aot-verified"))
    stamps.push_back(e.path().string());
  ASSERT_EQ(stamps.size(), 1u);
  EXPECT_THAT(mate::jit::testing::read_file(stamps[0]), HasSubstr("\"library\":\"" + m.path() + "\""));
  EXPECT_EQ(module_status(spec).state, ModuleState::Aot);
  EXPECT_EQ(detail::libraries_hashed(), hashed + 1) << "stamped and unchanged: not hashed";

  ASSERT_TRUE(mate::jit::testing::change_last_byte_keeping_mtime(built.at(0).path));
  ModuleStatus s = module_status(spec);
  EXPECT_EQ(detail::libraries_hashed(), hashed + 2);
  EXPECT_EQ(s.state, ModuleState::Missing) << "the AOT module is passed over";
  EXPECT_THAT(s.detail, HasSubstr("does not match the content hash"));
  EXPECT_FALSE(exists(stamps[0])) << "a library found damaged loses its stamp";
}

// The loader checks the library it opened, then dlopens it by path: a library renamed over it
// in between (here a sound library of another module) is noticed after the dlopen, unloaded,
// checked again, and the entry set aside and rebuilt.
TEST_F(JitLoad, LibraryReplacedBetweenItsCheckAndItsDlopenIsCheckedAgain) {
  auto spec = sample_axpy_spec("float", 144);
  const std::string entry = seed_cache_entry(spec, cache_root());
  TempDir other;
  auto replacement = build_aot({sample_axpy_spec("double", 144)}, other.path);
  ASSERT_TRUE(replacement.at(0).built) << replacement.at(0).skipped_reason;
  bool replaced = false;
  before_dlopen = [&](const std::string& path) {
    if (path != entry + "/module.so") return;
    std::filesystem::rename(replacement.at(0).path, path);
    replaced = true;
  };
  ::testing::internal::CaptureStderr();
  Module m = load_module(spec);
  std::string err = ::testing::internal::GetCapturedStderr();
  before_dlopen = nullptr;
  ASSERT_TRUE(replaced);
  EXPECT_EQ(m.origin(), Origin::JitBuilt) << err;
  EXPECT_THAT(err, HasSubstr("cache entry " + entry + " is unusable"));
  EXPECT_THAT(err, HasSubstr("set aside as "));
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  m.function<AxpyFn>("mate_sample_axpy")(4, 2.0f, x, y);
  EXPECT_EQ(y[3], 8.0f) << "the float module, not the one renamed in";
}

}  // namespace
