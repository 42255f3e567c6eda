// Warm hit: a fresh process loading an already-built module (registry, plan and key, compiler
// memo, stat, manifest, dlopen) against a fresh process of the same binary doing only the
// dlopen of the same library. Goal: within 2 ms. Children get a scratch MATE_WORKSPACE_BASE.
// The same pair for a module padded to 32 MiB shows what the content-hash check costs per MiB:
// a stamped hit (the library's verified stamp vouches for it: no hash) and an unstamped one (the
// stamp removed before each process: a hash, and the stamp written again).
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "mate/config.hpp"

namespace {

std::string g_workspace;
std::string g_library;         // the sample module (15 KB)
std::string g_padded_library;  // the padded module (kPaddedMib MiB)
constexpr int kPaddedMib = 32;

// Runs the probe with a minimal environment; returns its stdout when `capture`.
int run_probe(const std::vector<std::string>& args, std::string* capture = nullptr) {
  std::vector<std::string> env_strings{"MATE_WORKSPACE_BASE=" + g_workspace, "PATH=" + mate::config::path()};
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string probe = JIT_LOAD_PROBE;
  argv.push_back(probe.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipe_fds[2];
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (capture) {
    if (pipe(pipe_fds) != 0) return -1;
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  }
  pid_t pid;
  int rc = posix_spawn(&pid, probe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  if (capture) {
    close(pipe_fds[1]);
    char buf[4096];
    ssize_t n;
    while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) capture->append(buf, static_cast<std::size_t>(n));
    close(pipe_fds[0]);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double children_cpu_ms() {
  rusage r {};
  getrusage(RUSAGE_CHILDREN, &r);
  return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

// Wall time is what a user waits for, but on a shared machine it includes time the child sat
// in the run queue; child_cpu_ms (user + system CPU of the children) is the steadier figure.
void run_benchmark(benchmark::State& state, const std::vector<std::string>& args,
                   const std::function<void()>& before_each = nullptr) {
  double cpu0 = children_cpu_ms();
  for (auto _ : state) {
    if (before_each) {
      state.PauseTiming();
      before_each();
      state.ResumeTiming();
    }
    if (run_probe(args) != 0) state.SkipWithError("probe failed");
  }
  state.counters["child_cpu_ms"] = (children_cpu_ms() - cpu0) / static_cast<double>(state.iterations());
}

void BM_FreshProcess_DlopenOnly(benchmark::State& state) { run_benchmark(state, {"dlopen", g_library}); }
BENCHMARK(BM_FreshProcess_DlopenOnly)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(400)->Repetitions(3);

void BM_FreshProcess_LoadModuleWarmHit(benchmark::State& state) { run_benchmark(state, {"load"}); }
BENCHMARK(BM_FreshProcess_LoadModuleWarmHit)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(400)->Repetitions(3);

// The same for a module of kPaddedMib MiB: the content-hash check reads every byte.
void BM_FreshProcess_DlopenOnly_Padded(benchmark::State& state) { run_benchmark(state, {"dlopen", g_padded_library}); }
BENCHMARK(BM_FreshProcess_DlopenOnly_Padded)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(100)->Repetitions(3);

void BM_FreshProcess_LoadModuleWarmHit_Padded(benchmark::State& state) {
  run_benchmark(state, {"load", std::to_string(kPaddedMib)});
}
BENCHMARK(BM_FreshProcess_LoadModuleWarmHit_Padded)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(100)->Repetitions(3);

// The first hit after the stamp went missing: the hash, and the stamp written again.
void BM_FreshProcess_LoadModuleUnstampedHit_Padded(benchmark::State& state) {
  const std::string stamp = std::filesystem::path(g_padded_library).parent_path().string() + "/verified.json";
  run_benchmark(state, {"load", std::to_string(kPaddedMib)}, [&] { std::filesystem::remove(stamp); });
}
BENCHMARK(BM_FreshProcess_LoadModuleUnstampedHit_Padded)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(100)->Repetitions(3);

}  // namespace

int main(int argc, char** argv) {
  char tmpl[] = "/tmp/mate_bench_jit_XXXXXX";
  g_workspace = mkdtemp(tmpl);
  std::string out;
  // The first load builds the module; the second must be a warm hit and says where it is.
  if (run_probe({"path"}) != 0 || run_probe({"path"}, &out) != 0 || out.rfind("jit-cache ", 0) != 0) {
    std::fprintf(stderr, "bench_jit_warm_hit: could not prepare the module (%s)\n", out.c_str());
    return 1;
  }
  // "jit-cache <path> <libraries hashed>": a stamped warm hit hashes nothing.
  auto library_of = [](const std::string& line) { return line.substr(10, line.find(' ', 10) - 10); };
  auto hashed_of = [](const std::string& line) { return line.substr(line.rfind(' ') + 1); };
  if (hashed_of(out) != "0\n") {
    std::fprintf(stderr, "bench_jit_warm_hit: the warm hit hashed its library (%s)\n", out.c_str());
    return 1;
  }
  g_library = library_of(out);
  const std::string mib = std::to_string(kPaddedMib);
  out.clear();
  if (run_probe({"path", mib}) != 0 || run_probe({"path", mib}, &out) != 0 || out.rfind("jit-cache ", 0) != 0) {
    std::fprintf(stderr, "bench_jit_warm_hit: could not prepare the padded module (%s)\n", out.c_str());
    return 1;
  }
  if (hashed_of(out) != "0\n") {
    std::fprintf(stderr, "bench_jit_warm_hit: the padded warm hit hashed its library (%s)\n", out.c_str());
    return 1;
  }
  g_padded_library = library_of(out);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(g_workspace, ec);
  return 0;
}
