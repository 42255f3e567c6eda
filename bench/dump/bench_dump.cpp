// What a level-10 dump costs compared with writing the same bytes yourself.
//   RawWrite/N        baseline: create a file, write N bytes with write(2), close.
//   RawWriteFsync/N   the same with fsync before close (what each call.json update pays).
//   DumpCall/N   one instrumented call with an N-byte f32 input at MATE_LOGLEVEL=10: the
//                level-5 log record with statistics, the call directory, three atomic
//                call.json updates (each fsynced) and the tensor file (written to a
//                temporary, fsynced, renamed; its folder fsynced before call.json names it).
//   DumpTensor/N write_mtensor alone: the earlier default tensor file (temporary, fsync,
//                rename), without the rest; compare with RawWriteFsync.
//   DumpTensorTorchSave/N write_torch_save alone: the default `.pt` file (a zip with the data's
//                CRC-32, temporary, fsync, rename); compare with DumpTensor and RawWriteFsync.
// The dump directory is removed between iterations, outside the timing.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "mate/config.hpp"
#include "mate/dump/dump.hpp"
#include "mate/dump/tensor_file.hpp"
#include "mate/log/api.hpp"
#include "mate/tensor/dtype.hpp"

namespace {

namespace fs = std::filesystem;
using mate::config::ScopedOverride;
using mate::config::Var;

const fs::path kRoot = fs::temp_directory_path() / ("mate_bench_dump_" + std::to_string(::getpid()));

struct Input {
  std::vector<float> data;
  std::int64_t n;
  DLTensor dl{};
  explicit Input(std::size_t bytes) : data(bytes / 4, 1.5f), n(static_cast<std::int64_t>(bytes / 4)) {
    dl.data = data.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = 1;
    dl.dtype = mate::tensor::dl_dtype(mate::tensor::ScalarType::F32);
    dl.shape = &n;
  }
};

void consume(const DLTensor* x) {
  MATE_API("bench.consume", x).run([] {});
}

template <bool Sync>
void BM_RawWrite(benchmark::State& state) {
  Input in(static_cast<std::size_t>(state.range(0)));
  fs::create_directories(kRoot);
  const std::string path = (kRoot / "raw.bin").string();
  for (auto _ : state) {
    state.PauseTiming();  // as for the dumps: a new file each time, the old one removed untimed
    fs::remove(path);
    state.ResumeTiming();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    const char* p = reinterpret_cast<const char*>(in.data.data());
    std::size_t left = in.data.size() * 4;
    while (left > 0) {
      ssize_t w = ::write(fd, p, left);
      if (w <= 0) break;
      p += w;
      left -= static_cast<std::size_t>(w);
    }
    if (Sync) ::fsync(fd);
    ::close(fd);
  }
  fs::remove_all(kRoot);
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_DumpTensor(benchmark::State& state) {
  Input in(static_cast<std::size_t>(state.range(0)));
  fs::create_directories(kRoot);
  const std::string path = (kRoot / "t.mtensor").string();
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove(path);
    state.ResumeTiming();
    benchmark::DoNotOptimize(mate::dump::write_mtensor(path, mate::tensor::TensorView(in.dl)));
  }
  fs::remove_all(kRoot);
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_DumpTensorTorchSave(benchmark::State& state) {
  Input in(static_cast<std::size_t>(state.range(0)));
  fs::create_directories(kRoot);
  const std::string path = (kRoot / "t.pt").string();
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove(path);
    state.ResumeTiming();
    benchmark::DoNotOptimize(mate::dump::write_torch_save(path, mate::tensor::TensorView(in.dl)));
  }
  fs::remove_all(kRoot);
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_DumpCall(benchmark::State& state) {
  Input in(static_cast<std::size_t>(state.range(0)));
  std::vector<std::unique_ptr<ScopedOverride>> o;
  o.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGLEVEL, "10"));
  o.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGDEST, (kRoot.string() + ".log")));
  o.push_back(std::make_unique<ScopedOverride>(Var::MATE_DUMP_DIR, (kRoot / "dumps").string()));
  o.push_back(std::make_unique<ScopedOverride>(Var::MATE_DUMP_MAX_COUNT, "1000000000"));
  o.push_back(std::make_unique<ScopedOverride>(Var::MATE_DUMP_MAX_SIZE_GB, "1000000"));
  mate::log::reconfigure();
  mate::dump::reconfigure();
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove_all(kRoot / "dumps");
    state.ResumeTiming();
    consume(&in.dl);
  }
  o.clear();
  mate::log::reconfigure();
  mate::dump::reconfigure();
  fs::remove_all(kRoot);
  fs::remove(kRoot.string() + ".log");
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

}  // namespace

BENCHMARK(BM_RawWrite<false>)->Name("RawWrite")->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RawWrite<true>)->Name("RawWriteFsync")->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DumpTensor)->Name("DumpTensor")->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DumpTensorTorchSave)->Name("DumpTensorTorchSave")->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DumpCall)->Name("DumpCall")->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
