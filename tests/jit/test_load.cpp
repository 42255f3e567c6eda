// load_module() in one process: builds with ninja and the host compiler, loads, calls; AOT
// preference and MATE_DISABLE_JIT; build failures; module status; clear-cache; CUDA via nvcc.
#include <dlfcn.h>
#include <sys/stat.h>
#include <utime.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "jit/plan.hpp"
#include "jit/toolchain.hpp"
#include "jit_test_support.hpp"
#include "mate/config.hpp"
#include "mate/jit/admin.hpp"
#include "mate/jit/catalog.hpp"
#include "mate/jit/module.hpp"

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

}  // namespace
