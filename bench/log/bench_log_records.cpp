// Throughput of API log records against a bare write(2) of the same bytes per record.
//
//   build/default/bench/log/bench_log_records
//
// A downstream-like call (two 16x16 f32 tensors and a float, one thread) logged at levels 1, 3
// and 5 to a file on the build's file system, and the baseline: the same number of bytes per
// record written with one write(2) to an O_APPEND file (RawWrite/like_level/N: N's bytes per
// call, in as many writes as level N writes records). Compare calls_per_s pairwise. Goals
// (bench/README.md): level 1 >= 0.7x the baseline, level 3 >= 0.6x (two records per call),
// level 5 within 10% of level 3.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mate/config.hpp"
#include "mate/log/api.hpp"

namespace {

namespace fs = std::filesystem;

// A fresh log file per run, in the bench's working directory (a real file system, not /dev/null).
std::string log_path(const char* name) {
  const fs::path p = fs::current_path() / ("bench_log_records_" + std::string(name) + ".log");
  fs::remove(p);
  return p.string();
}

__attribute__((noinline)) float scaled_sum(const DLTensor* a, const DLTensor* b, float alpha) {
  return MATE_API("bench.scaled_sum", a, b, alpha).run([&] {
    const auto* x = static_cast<const float*>(a->data);
    const auto* y = static_cast<const float*>(b->data);
    return alpha * (x[0] + y[0]);
  });
}

struct Tensor16x16 {
  std::vector<float> data = std::vector<float>(256, 1.5f);
  std::int64_t shape[2] = {16, 16};
  DLTensor dl{};
  Tensor16x16() {
    dl.data = data.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = 2;
    dl.dtype = {kDLFloat, 32, 1};
    dl.shape = shape;
  }
};

// Points the log at a fresh file at `level` for the lifetime of this object.
class LogTo {
 public:
  LogTo(int level, const std::string& path)
      : level_(mate::config::Var::MATE_LOGLEVEL, std::to_string(level)), dest_(mate::config::Var::MATE_LOGDEST, path) {
    mate::log::reconfigure();
  }
  ~LogTo() { mate::log::set_level_for_testing(0); }

 private:
  mate::config::ScopedOverride level_, dest_;
};

int records_per_call(int level) { return level >= 3 ? 2 : 1; }  // inputs, then outputs

void BM_LogRecords(benchmark::State& state) {
  const int level = static_cast<int>(state.range(0));
  const std::string path = log_path(("level" + std::to_string(level)).c_str());
  Tensor16x16 a, b;
  {
    LogTo log(level, path);
    for (auto _ : state) benchmark::DoNotOptimize(scaled_sum(&a.dl, &b.dl, 0.5f));
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["bytes_per_call"] = static_cast<double>(fs::file_size(path)) / calls;
  state.counters["calls_per_s"] = benchmark::Counter(calls, benchmark::Counter::kIsRate);
  fs::remove(path);
}
BENCHMARK(BM_LogRecords)->Name("LogRecords/level")->Arg(1)->Arg(3)->Arg(5);

// MATE's own part of a logged call: the same call logged to /dev/null, whose write(2) costs the
// kernel next to nothing. Not in the goals; it shows what the rendering and bookkeeping cost.
void BM_LogRecordsToNull(benchmark::State& state) {
  const int level = static_cast<int>(state.range(0));
  Tensor16x16 a, b;
  LogTo log(level, "/dev/null");
  for (auto _ : state) benchmark::DoNotOptimize(scaled_sum(&a.dl, &b.dl, 0.5f));
  state.counters["calls_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_LogRecordsToNull)->Name("LogRecordsToNull/level")->Arg(1)->Arg(3)->Arg(5);

// The baseline of level `range(0)`: the bytes one call logs at that level (measured here, with
// the same call), written with as many bare write(2)s as the level writes records, to an
// O_APPEND file.
void BM_RawWrite(benchmark::State& state) {
  const int level = static_cast<int>(state.range(0));
  std::size_t bytes = 0;
  {
    const std::string probe = log_path("probe");
    Tensor16x16 a, b;
    {
      LogTo log(level, probe);
      for (int i = 0; i < 100; ++i) scaled_sum(&a.dl, &b.dl, 0.5f);
    }
    bytes = static_cast<std::size_t>(fs::file_size(probe)) / 100;
    fs::remove(probe);
  }
  const int writes = records_per_call(level);
  const std::string record(bytes / static_cast<std::size_t>(writes), 'x');
  const std::string path = log_path("raw");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    state.SkipWithError("cannot open the baseline's file");
    return;
  }
  for (auto _ : state) {
    for (int w = 0; w < writes; ++w) benchmark::DoNotOptimize(::write(fd, record.data(), record.size()));
  }
  ::close(fd);
  const double calls = static_cast<double>(state.iterations());
  state.counters["bytes_per_call"] = static_cast<double>(record.size() * static_cast<std::size_t>(writes));
  state.counters["calls_per_s"] = benchmark::Counter(calls, benchmark::Counter::kIsRate);
  fs::remove(path);
}
BENCHMARK(BM_RawWrite)->Name("RawWrite/like_level")->Arg(1)->Arg(3)->Arg(5);

}  // namespace

BENCHMARK_MAIN();
