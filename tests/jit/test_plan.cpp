// Module keys and plans: what changes a key and what does not, template rendering, spec
// validation, arch lists and the device arch detector hook.
#include <sys/stat.h>
#include <utime.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "jit/aot.hpp"
#include "jit/plan.hpp"
#include "jit_test_support.hpp"
#include "mate/config.hpp"
#include "mate/jit/catalog.hpp"

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using namespace mate::jit;
using detail::make_plan;
using ::testing::HasSubstr;

std::string key_of(const ModuleSpec& spec) { return make_plan(spec, "").key; }

const detail::KeyInput* input(const detail::Plan& plan, const std::string& name) {
  auto it = std::find_if(plan.inputs.begin(), plan.inputs.end(), [&](const auto& i) { return i.name == name; });
  return it == plan.inputs.end() ? nullptr : &*it;
}

TEST(JitPlan, KeyIsStableAndHostModulesAreKeyedByHostArch) {
  auto spec = sample_axpy_spec("float", 64);
  auto plan = make_plan(spec, "");
  EXPECT_EQ(plan.key.size(), 32u);
  EXPECT_EQ(plan.key, key_of(spec));
  EXPECT_EQ(plan.arch, detail::host_arch());
  EXPECT_TRUE(plan.buildable) << plan.why_not_buildable;
  ASSERT_NE(input(plan, "compiler_version"), nullptr);
  EXPECT_NE(input(plan, "compiler_version")->value, "unknown");
  EXPECT_EQ(input(plan, "mate_version")->value, MATE_TEST_VERSION);
}

TEST(JitPlan, EveryBinaryAffectingInputChangesTheKey) {
  auto base = sample_axpy_spec("float", 64);
  const std::string k = key_of(base);
  EXPECT_NE(key_of(sample_axpy_spec("float", 32)), k) << "template parameter";
  EXPECT_NE(key_of(sample_axpy_spec("double", 64)), k) << "dtype";
  auto with_flag = base;
  with_flag.cflags.push_back("-DEXTRA=1");
  EXPECT_NE(key_of(with_flag), k) << "module flags";
  {
    ScopedOverride o(Var::MATE_EXTRA_CFLAGS, "-O3");
    EXPECT_NE(key_of(base), k) << "MATE_EXTRA_CFLAGS";
  }
  {
    ScopedOverride o(Var::MATE_EXTRA_LDFLAGS, "-Wl,-O1");
    EXPECT_NE(key_of(base), k) << "MATE_EXTRA_LDFLAGS";
  }
  {
    ScopedOverride o(Var::CXX, "clang++");
    EXPECT_NE(key_of(base), k) << "compiler";
  }
  {
    // The parallelism and verbosity of the build cannot change the binary.
    ScopedOverride j(Var::MAX_JOBS, "1");
    ScopedOverride v(Var::MATE_JIT_VERBOSE, "1");
    EXPECT_EQ(key_of(base), k);
  }
  EXPECT_EQ(key_of(base), k);
}

// Two names of one executable that behave differently by the name they are run as (as ccache's
// g++ and clang++ links, or clang and clang++): each is asked for its version and keyed apart.
TEST(JitPlan, TwoNamesOfOneCompilerExecutableAreAskedSeparatelyAndKeyedApart) {
  mate::jit::testing::TempDir dir;
  std::string multi = dir.path + "/multi";
  {
    std::ofstream out(multi);
    out << "#!/bin/sh\n"
        << "echo \"$0 $*\" >> " << dir.path << "/calls.log\n"
        << "case \"$0\" in *clang*) name=clang;; *) name=gcc;; esac\n"
        << "case \" $* \" in *' --version '*) echo \"fake $name 1.0\"; exit 0;; esac\n"
        << "exec /usr/bin/c++ \"$@\"\n";
  }
  ASSERT_EQ(chmod(multi.c_str(), 0755), 0);
  std::filesystem::create_directory(dir.path + "/other");
  for (const char* link : {"/fake-g++", "/fake-clang++", "/other/fake-g++"})
    std::filesystem::create_symlink(multi, dir.path + link);
  const std::string memo = dir.path + "/memo";
  auto plan_for = [&](const std::string& cxx) {
    ScopedOverride o(Var::CXX, cxx);
    return make_plan(sample_axpy_spec("float", 64), memo);
  };
  auto gxx = plan_for(dir.path + "/fake-g++");
  auto clang = plan_for(dir.path + "/fake-clang++");
  auto gxx_elsewhere = plan_for(dir.path + "/other/fake-g++");
  EXPECT_EQ(gxx.compiler.resolved, clang.compiler.resolved) << "one executable";
  EXPECT_EQ(input(gxx, "compiler_version")->value, "fake gcc 1.0");
  EXPECT_EQ(input(clang, "compiler_version")->value, "fake clang 1.0") << "not gcc's remembered answer";
  EXPECT_EQ(input(gxx_elsewhere, "compiler_version")->value, "fake gcc 1.0");
  EXPECT_EQ(input(clang, "compiler_invoked")->value, dir.path + "/fake-clang++");
  EXPECT_NE(gxx.key, clang.key);
  EXPECT_NE(gxx.key, gxx_elsewhere.key) << "same answer, different name: still keyed apart";
  EXPECT_EQ(plan_for(dir.path + "/fake-clang++").key, clang.key) << "stable";
  std::string calls = mate::jit::testing::read_file(dir.path + "/calls.log");
  EXPECT_EQ(mate::jit::testing::count_lines_with(calls, "--version"), 3) << "each name asked once:\n" << calls;

  // An AOT module is built by the packager's compiler: which compiler is installed here (its
  // path, name or version) does not decide whether the module matches.
  detail::Manifest built = detail::manifest_for(gxx_elsewhere);
  EXPECT_EQ(detail::aot_mismatch(gxx, built), "");
  EXPECT_EQ(detail::aot_mismatch(clang, built), "") << "another compiler here still uses the AOT module";
}

// A g++ wrapper first on PATH, an NVCC_CCBIN or a CXX all change what nvcc compiles host code
// with; NVCC_APPEND_FLAGS and NVCC_PREPEND_FLAGS change nvcc's command line. All change the key.
TEST(JitPlan, CudaKeyHasNvccsHostCompilerAndNvccsOwnVariables) {
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, "9.0");
  ScopedOverride no_cxx(Var::CXX, std::nullopt);
  ScopedOverride no_ccbin(Var::NVCC_CCBIN, std::nullopt);
  auto base = make_plan(sample_cuda_scale_spec(), "");
  if (!base.compiler_known) GTEST_SKIP() << "nvcc not available: " << base.why_not_buildable;
  ASSERT_NE(input(base, "host_compiler"), nullptr);
  EXPECT_THAT(input(base, "host_compiler")->value, HasSubstr("/g++ ("));
  EXPECT_TRUE(base.compiler_args.empty()) << "without CXX nvcc chooses its host compiler itself";
  const std::string k = base.key;
  const std::string host_key = key_of(sample_axpy_spec("float", 64));
  {
    ScopedOverride o(Var::NVCC_APPEND_FLAGS, "-DFOO=42");
    EXPECT_NE(key_of(sample_cuda_scale_spec()), k) << "NVCC_APPEND_FLAGS";
    EXPECT_EQ(key_of(sample_axpy_spec("float", 64)), host_key) << "nvcc's variables are not a host module's";
  }
  {
    ScopedOverride o(Var::NVCC_PREPEND_FLAGS, "-DFOO=42");
    EXPECT_NE(key_of(sample_cuda_scale_spec()), k) << "NVCC_PREPEND_FLAGS";
  }
  {
    ScopedOverride o(Var::NVCC_CCBIN, "/usr/bin/c++");
    EXPECT_NE(key_of(sample_cuda_scale_spec()), k) << "NVCC_CCBIN";
  }
  mate::jit::testing::TempDir dir;
  {
    std::ofstream out(dir.path + "/g++");
    out << "#!/bin/sh\nexec /usr/bin/g++ \"$@\"\n";
  }
  ASSERT_EQ(chmod((dir.path + "/g++").c_str(), 0755), 0);
  {
    ScopedOverride path(Var::PATH, dir.path + ":" + mate::config::path());
    auto wrapped = make_plan(sample_cuda_scale_spec(), "");
    EXPECT_NE(wrapped.key, k) << "a g++ wrapper first on PATH";
    EXPECT_THAT(input(wrapped, "host_compiler")->value, HasSubstr(dir.path + "/g++ ("));
  }
  {
    ScopedOverride cxx(Var::CXX, dir.path + "/g++");
    auto with_cxx = make_plan(sample_cuda_scale_spec(), "");
    EXPECT_NE(with_cxx.key, k) << "CXX";
    EXPECT_EQ(with_cxx.compiler_args, (std::vector<std::string>{"-ccbin", dir.path + "/g++"}));
    auto argv = detail::expanded_argv(with_cxx, with_cxx.steps.front());
    ASSERT_GE(argv.size(), 3u);
    EXPECT_EQ(argv[1], "-ccbin");
    EXPECT_EQ(argv[2], dir.path + "/g++");
    EXPECT_EQ(input(with_cxx, "command module.so")->value, input(base, "command module.so")->value)
        << "-ccbin is the compiler's, not in the recorded commands (AOT modules stay comparable)";
  }
  EXPECT_EQ(key_of(sample_cuda_scale_spec()), k);
}

// A relative compiler path is made absolute once: the build runs in another directory, and
// `./x/c++` and `x/c++` are one compiler.
TEST(JitPlan, RelativeCompilerPathIsMadeAbsoluteAndKeyedAsOne) {
  mate::jit::testing::TempDir dir;
  std::filesystem::create_directory(dir.path + "/x");
  {
    std::ofstream out(dir.path + "/x/c++");
    out << "#!/bin/sh\nexec /usr/bin/c++ \"$@\"\n";
  }
  ASSERT_EQ(chmod((dir.path + "/x/c++").c_str(), 0755), 0);
  auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path);
  std::string k1, k2, invoked;
  {
    ScopedOverride o(Var::CXX, "x/c++");
    auto plan = make_plan(sample_axpy_spec("float", 64), "");
    k1 = plan.key;
    invoked = plan.compiler.invoked;
  }
  {
    ScopedOverride o(Var::CXX, "./x/c++");
    k2 = make_plan(sample_axpy_spec("float", 64), "").key;
  }
  std::filesystem::current_path(cwd);
  EXPECT_EQ(invoked, dir.path + "/x/c++");
  EXPECT_EQ(k1, k2);
}

TEST(JitPlan, CompilerThatIsNotThereSaysSoAndWhatWasFound) {
  mate::jit::testing::TempDir dir;
  { std::ofstream(dir.path + "/plain") << "not a program"; }
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, "9.0");
  auto problem = [](const std::string& nvcc) {
    ScopedOverride o(Var::MATE_NVCC, nvcc);
    return make_plan(sample_cuda_scale_spec(), "").why_not_buildable;
  };
  EXPECT_THAT(problem("/nope"), HasSubstr("nvcc not found: MATE_NVCC='/nope' does not exist"));
  EXPECT_THAT(problem(dir.path + "/plain"), HasSubstr("MATE_NVCC='" + dir.path + "/plain' is not executable"));
  EXPECT_THAT(problem(dir.path), HasSubstr("MATE_NVCC='" + dir.path + "' is a directory"));
}

TEST(JitPlan, RecordedCommandsUseRelativePathsAndACompilerPlaceholder) {
  auto plan = make_plan(sample_axpy_spec("float", 64), "");
  auto* compile = input(plan, "command obj/axpy.cpp.o");
  ASSERT_NE(compile, nullptr);
  EXPECT_THAT(compile->value, HasSubstr("<compiler> -std=c++17"));
  EXPECT_THAT(compile->value, HasSubstr("-c src/axpy.cpp -o obj/axpy.cpp.o"));
  EXPECT_EQ(compile->value.find("/usr/"), std::string::npos) << compile->value;
  EXPECT_NE(input(plan, "command module.so"), nullptr);
  EXPECT_NE(input(plan, "source src/axpy.cpp"), nullptr);
}

TEST(JitPlan, TemplatesRenderParametersAndRejectUnknownPlaceholders) {
  std::map<std::string, std::string> p{{"dtype", "float"}, {"tile", "64"}};
  EXPECT_EQ(detail::render_template("m", "f.cpp", "T={{dtype}} N={{tile}} {{{{x}}", p), "T=float N=64 {{x}}");
  try {
    detail::render_template("gemm", "gemm.cpp", "{{dtyp}}", p);
    FAIL() << "expected an error";
  } catch (const ModuleError& e) {
    EXPECT_EQ(e.kind(), ModuleError::Kind::BadSpec);
    EXPECT_THAT(e.what(), HasSubstr("module 'gemm', source 'gemm.cpp': placeholder {{dtyp}} has no parameter"));
    EXPECT_THAT(e.what(), HasSubstr("dtype, tile"));
  }
}

TEST(JitPlan, BadSpecsAreRejectedWithTheReason) {
  auto expect_bad = [](ModuleSpec spec, const char* text) {
    try {
      make_plan(spec, "");
      ADD_FAILURE() << "expected an error for " << spec.name;
    } catch (const ModuleError& e) {
      EXPECT_EQ(e.kind(), ModuleError::Kind::BadSpec);
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
  };
  expect_bad(ModuleSpec{.name = "a/b", .sources = {{"a.cpp", "int x;"}}}, "character '/'");
  expect_bad(ModuleSpec{.name = "", .sources = {{"a.cpp", "int x;"}}}, "module name '' is invalid");
  expect_bad(ModuleSpec{.name = "m"}, "module 'm' has no sources");
  expect_bad(ModuleSpec{.name = "m", .sources = {{"../a.cpp", "int x;"}}}, "source file name '../a.cpp' is invalid");
  expect_bad(ModuleSpec{.name = "m", .sources = {{"a.h", "int x;"}}}, "no source to compile");
}

TEST(JitArch, CudaWithoutListOrVisibleDeviceIsNotBuildableWithTheReason) {
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, std::nullopt);
  mate::jit::testing::NoVisibleDevices no_devices;
  auto plan = make_plan(sample_cuda_scale_spec(), "");
  EXPECT_FALSE(plan.arch_known);
  EXPECT_FALSE(plan.buildable);
  EXPECT_THAT(plan.why_not_buildable, HasSubstr("MATE_CUDA_ARCH_LIST is unset"));
  EXPECT_THAT(plan.why_not_buildable, HasSubstr("no CUDA device is visible"));
}

std::vector<std::string> detect_sm80() { return {"8.0"}; }
std::vector<std::string> detect_nothing() { return {}; }

TEST(JitArch, DetectorHookSuppliesArchsWhenNoListIsSet) {
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, std::nullopt);
  set_device_arch_detector(mate::device::Kind::Cuda, detect_sm80);
  auto plan = make_plan(sample_cuda_scale_spec(), "");
  EXPECT_EQ(plan.arch_list, std::vector<std::string>{"8.0"});
  EXPECT_EQ(plan.arch, "cuda_8.0");
  {
    ScopedOverride explicit_list(Var::MATE_CUDA_ARCH_LIST, "9.0 10.0");
    auto p2 = make_plan(sample_cuda_scale_spec(), "");
    EXPECT_EQ(p2.arch_list, (std::vector<std::string>{"9.0", "10.0"})) << "the variable wins";
    EXPECT_NE(p2.key, plan.key);
  }
  set_device_arch_detector(mate::device::Kind::Cuda, detect_nothing);
  auto none = make_plan(sample_cuda_scale_spec(), "");
  EXPECT_FALSE(none.buildable);
  EXPECT_THAT(none.why_not_buildable, HasSubstr("no CUDA device is visible"));
  set_device_arch_detector(mate::device::Kind::Cuda, nullptr);
}

std::vector<std::string> detect_unsorted() { return {"9.0", "8.0", "9.0"}; }

// Arch lists from the variable are sorted by version and de-duplicated, as detected ones are:
// one list, one cache directory, one key, one -gencode per arch.
TEST(JitArch, ArchListsAreSortedAndDeduplicatedWhateverTheirSource) {
  auto plan_for = [](const char* list) {
    ScopedOverride o(Var::MATE_CUDA_ARCH_LIST, list);
    return make_plan(sample_cuda_scale_spec(), "");
  };
  auto twice = plan_for("9.0 9.0");
  EXPECT_EQ(twice.arch_list, std::vector<std::string>{"9.0"});
  EXPECT_EQ(twice.arch, "cuda_9.0");
  EXPECT_EQ(std::count(twice.arch_flags.begin(), twice.arch_flags.end(), "-gencode"), 1);
  EXPECT_EQ(twice.key, plan_for("9.0").key);
  auto reversed = plan_for("9.0 8.0");
  EXPECT_EQ(reversed.arch, "cuda_8.0_9.0");
  EXPECT_EQ(reversed.key, plan_for("8.0 9.0").key);
  EXPECT_EQ(plan_for("10.0 9.0").arch_list, (std::vector<std::string>{"9.0", "10.0"})) << "by version, not text";
  EXPECT_EQ(plan_for("09.0").arch, "cuda_9.0");
  ScopedOverride unset(Var::MATE_CUDA_ARCH_LIST, std::nullopt);
  set_device_arch_detector(mate::device::Kind::Cuda, detect_unsorted);
  EXPECT_EQ(make_plan(sample_cuda_scale_spec(), "").arch, "cuda_8.0_9.0");
  set_device_arch_detector(mate::device::Kind::Cuda, nullptr);
}

TEST(JitArch, InvalidArchListIsAConfigError) {
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, "sm_90");
  EXPECT_THROW(make_plan(sample_cuda_scale_spec(), ""), mate::config::ConfigError);
}

TEST(JitArch, MusaWithoutMccIsNotBuildableAndSaysSetMateMcc) {
  ScopedOverride list(Var::MATE_MUSA_ARCH_LIST, "3.1");
  ScopedOverride mcc(Var::MATE_MCC, std::nullopt);
  ModuleSpec spec{.name = "musa_probe", .toolchain = Toolchain::Musa, .sources = {{"k.mu", "int x;"}}};
  auto plan = make_plan(spec, "");
  EXPECT_TRUE(plan.arch_known);
  EXPECT_EQ(plan.arch, "musa_3.1");
  EXPECT_FALSE(plan.buildable);
  EXPECT_THAT(plan.why_not_buildable, HasSubstr("mcc not found"));
  EXPECT_THAT(plan.why_not_buildable, HasSubstr("(set MATE_MCC)"));
}

}  // namespace
