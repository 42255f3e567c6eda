// `mate guard-run -- python …` on real PyTorch and numpy programs (issue 20): Debian's
// /usr/bin/python3 with python3-torch and python3-numpy, on the machine's own vm.max_map_count,
// with no variable set. Imports and a training step behave as without the guard; tensor and
// array overflows fault at the access or are caught at free as docs/guard-allocator.md says;
// --summary, --align and --mode auto do what the guide shows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <string>

#include "guard_test_mode.hpp"
#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace {

using mate::testing::run;
using ::testing::HasSubstr;
using ::testing::Not;

const char* kPython = "/usr/bin/python3";

// Why the Python tests cannot run here ("" when they can): the sanitizer builds' preload cannot
// be used, and the system interpreter or its packages may be missing.
std::string why_not_runnable(const char* module) {
  if (mate::testing::kSanitizerBuild) return "mate guard-run's preload library cannot run under a sanitizer";
  if (access(kPython, X_OK) != 0) return std::string(kPython) + " is absent (Debian's python3 runs these tests)";
  // find_spec locates the module without importing it (an import of torch takes seconds).
  auto probe = run({kPython, "-c", std::string("import importlib.util, sys; sys.exit(importlib.util.find_spec('") + module +
                                       "') is None)"});
  if (probe.exit_code != 0)
    return std::string(kPython) + " has no module " + module + " (install python3-" + module + "): " + probe.err.substr(0, 300);
  return "";
}

#define SKIP_UNLESS_PYTHON_HAS(module)                                   \
  do {                                                                    \
    static const std::string why = why_not_runnable(module);             \
    if (!why.empty()) GTEST_SKIP() << why;                               \
  } while (0)

// `mate guard-run GUARD_ARGS -- python3 PYTHON_ARGS`
mate::testing::RunResult guarded_python(std::vector<std::string> guard_args, std::vector<std::string> python_args) {
  std::vector<std::string> argv{MATE_BINARY, "guard-run"};
  argv.insert(argv.end(), guard_args.begin(), guard_args.end());
  argv.insert(argv.end(), {"--", kPython});
  argv.insert(argv.end(), python_args.begin(), python_args.end());
  mate::testing::RunOptions options;
  options.env["PYTHONHASHSEED"] = "0";  // the same allocations from run to run (--mode auto)
  return run(argv, options);
}

mate::testing::RunResult guarded(std::vector<std::string> guard_args, const std::string& script) {
  return guarded_python(std::move(guard_args), {"-c", script});
}

// A small CPU training step (examples/python/torch_train_step.py, also what
// bench/guard/run_torch_bench.sh times). On stderr, whether every parameter's and gradient's
// storage ends where a tail-mode guarded allocation does.
const char* kTrainingStep = MATE_SOURCE_DIR "/examples/python/torch_train_step.py";

TEST(GuardRunPython, ImportTorchBehavesAsWithoutTheGuard) {
  SKIP_UNLESS_PYTHON_HAS("torch");
  const std::string script = "import torch; print(torch.__version__, torch.ones(3).sum().item())";
  auto plain = run({kPython, "-c", script});
  auto g = guarded({}, script);
  EXPECT_EQ(g.exit_code, plain.exit_code) << g.err;
  EXPECT_EQ(g.out, plain.out);
  EXPECT_THAT(g.err, Not(HasSubstr("failed to map segment")));
  EXPECT_THAT(g.err, Not(HasSubstr("used up their share")));
}

TEST(GuardRunPython, ImportNumpyBehavesAsWithoutTheGuard) {
  SKIP_UNLESS_PYTHON_HAS("numpy");
  const std::string script = "import numpy; print(numpy.arange(10).sum(), numpy.ones((3, 3)).dot(numpy.ones(3)))";
  auto plain = run({kPython, "-c", script});
  auto g = guarded({}, script);
  EXPECT_EQ(g.exit_code, plain.exit_code) << g.err;
  EXPECT_EQ(g.out, plain.out);
}

// pytest collects and runs a torch test under the guard with the result and status it has
// without it (the timing in its last line aside).
TEST(GuardRunPython, PytestRunsATorchTestAsWithoutTheGuard) {
  SKIP_UNLESS_PYTHON_HAS("torch");
  SKIP_UNLESS_PYTHON_HAS("pytest");
  mate::testing::TempDir dir("mate_guard_pytest");
  std::ofstream(dir / "test_sum.py") << "import torch\n"
                                        "def test_sum():\n"
                                        "    assert torch.ones(4).sum().item() == 4\n"
                                        "def test_fails():\n"
                                        "    assert torch.zeros(2).sum().item() == 1\n";
  const std::vector<std::string> pytest{kPython, "-m", "pytest", "-q", "-p", "no:cacheprovider", (dir / "test_sum.py").string()};
  auto plain = run(pytest);
  std::vector<std::string> argv{MATE_BINARY, "guard-run", "--"};
  argv.insert(argv.end(), pytest.begin(), pytest.end());
  auto g = run(argv);
  EXPECT_EQ(plain.exit_code, 1) << plain.out << plain.err;
  EXPECT_EQ(g.exit_code, plain.exit_code) << g.out << g.err;
  EXPECT_THAT(g.out, HasSubstr("1 failed, 1 passed"));
  EXPECT_THAT(g.out, HasSubstr("assert 0.0 == 1"));
}

// The training step prints the same under the guard, every tensor is guarded, and --summary says
// how many allocations were guarded and why the others were not.
TEST(GuardRunPython, TrainingStepBehavesAsWithoutTheGuardWithTensorsGuarded) {
  SKIP_UNLESS_PYTHON_HAS("torch");
  auto plain = run({kPython, kTrainingStep});
  auto g = guarded_python({"--summary"}, {kTrainingStep});
  EXPECT_EQ(g.exit_code, plain.exit_code) << g.err;
  EXPECT_EQ(g.out, plain.out);
  EXPECT_THAT(g.err, HasSubstr("tensor storages at a guard: True"));
  EXPECT_THAT(plain.err, HasSubstr("tensor storages at a guard: False"));
  EXPECT_THAT(g.err, ::testing::ContainsRegex("mate guard: summary: guarded [1-9][0-9]* allocations \\([0-9]+\\.[0-9] MiB\\), "
                                              "[0-9]+ not guarded"));
  // One summary line, from the process guard-run started.
  EXPECT_EQ(g.err.find("summary:"), g.err.rfind("summary:"));
}

// --log-allocations implies --summary; without either no summary is printed.
TEST(GuardRunPython, LogAllocationsImpliesTheSummary) {
  SKIP_UNLESS_PYTHON_HAS("json");
  auto logged = guarded({"--log-allocations"}, "print(len(bytearray(5000)))");
  EXPECT_EQ(logged.exit_code, 0) << logged.err;
  EXPECT_EQ(logged.out, "5000\n");
  EXPECT_THAT(logged.err, HasSubstr("mate guard: alloc #"));
  EXPECT_THAT(logged.err, ::testing::ContainsRegex("mate guard: summary: guarded [1-9][0-9]* allocations"));
  auto quiet = guarded({}, "print(len(bytearray(5000)))");
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_THAT(quiet.err, Not(HasSubstr("summary")));
}

// (torch 1.13's tensors have no .nbytes: element_size() * nelement().)
// A tensor whose size is a multiple of c10's 64-byte alignment ends at the guard page in tail
// mode: a write one element past its end faults at the access, naming the allocation.
TEST(GuardRunPython, TensorWrittenPastItsEndFaultsAtTheAccess) {
  SKIP_UNLESS_PYTHON_HAS("torch");
  auto g = guarded({"--mode", "tail"}, R"(
import ctypes, torch
t = torch.zeros(16, dtype=torch.float32)  # 64 bytes
print("before", flush=True)
ctypes.memmove(t.data_ptr() + t.element_size() * t.nelement(), (ctypes.c_char * 4)(), 4)
print("not reached", flush=True)
)");
  EXPECT_EQ(g.exit_code, 139) << g.err;
  EXPECT_EQ(g.out, "before\n");
  EXPECT_THAT(g.err, ::testing::ContainsRegex("overflow: SIGSEGV on a write to 0x[0-9a-f]+, 0 bytes past the end of "
                                              "allocation #[0-9]+ of 64 bytes"));
}

// Another size: the write lands in the padding up to 64 bytes, before the guard, and is caught
// when the tensor is freed.
TEST(GuardRunPython, TensorOfAnotherSizeIsCaughtAtFree) {
  SKIP_UNLESS_PYTHON_HAS("torch");
  auto g = guarded({}, R"(
import ctypes, torch
t = torch.zeros(10, dtype=torch.float32)  # 40 bytes
ctypes.memmove(t.data_ptr() + t.element_size() * t.nelement(), (ctypes.c_char * 4)(b'\x01', b'\x02', b'\x03', b'\x04'), 4)
del t
print("not reached", flush=True)
)");
  EXPECT_EQ(g.exit_code, 134) << g.err;
  EXPECT_THAT(g.err, HasSubstr("canary corrupted at free: allocation #"));
  EXPECT_THAT(g.err, HasSubstr("of 40 bytes"));
  EXPECT_THAT(g.err, HasSubstr("first corrupted byte: 0 bytes past the end (offset 40)"));
}

TEST(GuardRunPython, HeadModeFaultsOneElementBeforeTheStart) {
  SKIP_UNLESS_PYTHON_HAS("torch");
  auto g = guarded({"--mode", "head"}, R"(
import ctypes, torch
t = torch.zeros(10, dtype=torch.float32)
ctypes.memmove(t.data_ptr() - 4, (ctypes.c_char * 4)(), 4)
print("not reached", flush=True)
)");
  EXPECT_EQ(g.exit_code, 139) << g.err;
  EXPECT_THAT(g.err, ::testing::ContainsRegex("underrun: SIGSEGV on a write to 0x[0-9a-f]+, 4 bytes before the start of "
                                              "allocation #[0-9]+ of 40 bytes"));
}

TEST(GuardRunPython, TensorStorageUsedAfterFreeFaults) {
  SKIP_UNLESS_PYTHON_HAS("torch");
  auto g = guarded({}, R"(
import ctypes, torch
t = torch.ones(1000, dtype=torch.float32)
address = t.data_ptr()
del t
print(ctypes.c_float.from_address(address + 400).value, flush=True)
)");
  EXPECT_EQ(g.exit_code, 139) << g.err;
  EXPECT_EQ(g.out, "");
  EXPECT_THAT(g.err, HasSubstr("use-after-free"));
  EXPECT_THAT(g.err, HasSubstr("of 4000 bytes"));
}

// numpy arrays come from malloc (16-byte alignment): one of 8000 bytes ends at the guard.
TEST(GuardRunPython, NumpyArrayWrittenPastItsEndFaultsAtTheAccess) {
  SKIP_UNLESS_PYTHON_HAS("numpy");
  auto g = guarded({}, R"(
import ctypes, numpy
a = numpy.zeros(1000)  # 8000 bytes
ctypes.memmove(a.ctypes.data + a.nbytes, (ctypes.c_char * 8)(), 8)
print("not reached", flush=True)
)");
  EXPECT_EQ(g.exit_code, 139) << g.err;
  EXPECT_THAT(g.err, ::testing::ContainsRegex("overflow: SIGSEGV on a write to 0x[0-9a-f]+, 0 bytes past the end of "
                                              "allocation #[0-9]+ of 8000 bytes"));
}

// --align 1: a 13-byte block ends exactly at the guard, so a 1-byte overrun faults at once; with
// the default alignment the same write lands in the padding and is caught at free. (A C program:
// CPython itself does not start with odd-size blocks at odd addresses, docs/guard-allocator.md.)
TEST(GuardRunPython, AlignOneCatchesAOneByteOverrunAtTheAccess) {
  if (mate::testing::kSanitizerBuild) GTEST_SKIP() << "mate guard-run's preload library cannot run under a sanitizer";
  auto exact = run({MATE_BINARY, "guard-run", "--align", "1", "--", MATE_ODD_SIZE_CHILD});
  EXPECT_EQ(exact.exit_code, 139) << exact.err;
  EXPECT_EQ(exact.out, "");
  EXPECT_THAT(exact.err, ::testing::ContainsRegex("overflow: SIGSEGV on a write to 0x[0-9a-f]+, 0 bytes past the end of "
                                                  "allocation #[0-9]+ of 13 bytes"));
  auto padded = run({MATE_BINARY, "guard-run", "--", MATE_ODD_SIZE_CHILD});
  EXPECT_EQ(padded.exit_code, 134) << padded.err;
  EXPECT_EQ(padded.out, "wrote\n");
  EXPECT_THAT(padded.err, HasSubstr("canary corrupted at free"));
  EXPECT_THAT(padded.err, HasSubstr("of 13 bytes"));
}

TEST(GuardRunPython, AlignRejectsWhatIsNoPowerOfTwo) {
  for (const char* bad : {"0", "3", "8192", "x"}) {
    auto r = run({MATE_BINARY, "guard-run", "--align", bad, "--", "true"});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("expected a power of two from 1 to 4096")) << bad;
  }
}

// --mode auto: tail mode finds the underrun only at free, so the same command runs again in head
// mode, which faults at the access; one verdict names the side.
TEST(GuardRunPython, AutoModeRerunsInHeadModeAndGivesAVerdict) {
  SKIP_UNLESS_PYTHON_HAS("ctypes");
  auto g = guarded({"--mode", "auto"}, R"(
import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
p = libc.malloc(4000)
ctypes.memset(p - 4, 0x41, 4)
libc.free(p)
)");
  EXPECT_EQ(g.exit_code, 139) << g.err;
  EXPECT_THAT(g.err, HasSubstr("canary corrupted at free"));
  EXPECT_THAT(g.err, HasSubstr("running the same command again in head mode"));
  EXPECT_THAT(g.err, ::testing::ContainsRegex("underrun: SIGSEGV on a write to 0x[0-9a-f]+, 4 bytes before the start of "
                                              "allocation #[0-9]+ of 4000 bytes"));
  EXPECT_THAT(g.err, HasSubstr("verdict: underrun (before the start); head mode faulted at the first invalid access"));
}

// A write in the padding after the end faults in no mode: a verdict, no rerun.
TEST(GuardRunPython, AutoModeGivesAVerdictWithoutARerunForTheAlignmentPadding) {
  SKIP_UNLESS_PYTHON_HAS("ctypes");
  auto g = guarded({"--mode", "auto"}, R"(
import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
p = libc.malloc(4001)
ctypes.memset(p + 4001, 0x41, 1)
libc.free(p)
)");
  EXPECT_EQ(g.exit_code, 134) << g.err;
  EXPECT_THAT(g.err, HasSubstr("canary corrupted at free"));
  EXPECT_THAT(g.err, Not(HasSubstr("running the same command again")));
  EXPECT_THAT(g.err, ::testing::ContainsRegex("verdict: overrun \\(past the end\\), within the allocation's alignment "
                                              "padding: tail mode found the canary 0 bytes past the end of allocation "
                                              "#[0-9]+ of 4001 bytes"));
}

// A program that ends cleanly is run once.
TEST(GuardRunPython, AutoModeDoesNotRerunACleanProgram) {
  SKIP_UNLESS_PYTHON_HAS("ctypes");
  auto g = guarded({"--mode", "auto"}, "print('once')");
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out, "once\n");
  EXPECT_THAT(g.err, Not(HasSubstr("verdict")));
}

}  // namespace
