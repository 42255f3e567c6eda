// Child process for the log tests. Modes:
//   crash              an instrumented call that writes to an inaccessible page
//   crash-context      as crash, with a SIGSEGV handler printing the crash context to stderr
//   stress THREADS N   THREADS threads, each making N instrumented calls with large records
//   overflow           an instrumented call that writes one element past a heap buffer (for
//                      `mate guard-run`, whose report names the call in flight)
//   fork               a call, fork(); the child makes 2 calls, the parent 1 more after it; each
//                      prints its pid on stdout ("parent P" / "child C")
// The configuration comes from the environment (MATE_LOGLEVEL, MATE_LOGDEST, MATE_LOGFORMAT).
#include <sys/mman.h>

#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "mate/core/crash_context.hpp"
#include "dl_tensor.hpp"
#include "mate/log/api.hpp"

namespace {

// A page that faults on write: a real SIGSEGV, without undefined behaviour the sanitizers flag.
volatile int* fault_address() {
  void* p = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return static_cast<volatile int*>(p);
}

void crashing_kernel(const DLTensor* input, int block_size, const char* tag) {
  MATE_API_SCOPE("CrashingOp.run", input, block_size, tag);
  *fault_address() = 42;  // the "kernel" faults
}

void overflowing_kernel(const DLTensor* input, int count) {
  MATE_API_SCOPE("OverflowingOp.run", input, count);
  // volatile: the compiler would drop a store to memory freed right after
  auto* out = static_cast<volatile float*>(std::malloc(static_cast<std::size_t>(count) * sizeof(float)));
  volatile int index = count;  // the bug: one past the end
  out[index] = 1.0f;
  std::free(const_cast<float*>(out));
}

void on_segv(int) {
  mate::core::write_crash_context(2);
  _exit(3);
}

float payload(const std::vector<const DLTensor*>& tensors, std::int64_t id, const std::string& label) {
  return MATE_API("Stress.call", tensors, id, label).run([&] { return static_cast<float>(id); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  std::vector<float> data(64, 1.0f);
  std::vector<std::int64_t> shape{8, 8};
  DLTensor t = mate::testing::dl_view(data.data(), mate::tensor::ScalarType::F32, shape);
  if (mode == "crash" || mode == "crash-context") {
    if (mode == "crash-context") std::signal(SIGSEGV, on_segv);
    crashing_kernel(&t, 128, "before-the-fault");
    return 0;
  }
  if (mode == "fork") {
    payload({&t}, 1, "before fork");
    std::fflush(stdout);
    const pid_t child = ::fork();
    if (child == 0) {
      payload({&t}, 2, "child");
      payload({&t}, 3, "child");
      std::printf("child %d\n", static_cast<int>(::getpid()));
      std::fflush(stdout);
      _exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    payload({&t}, 4, "after fork");
    std::printf("parent %d\n", static_cast<int>(::getpid()));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  if (mode == "overflow") {
    overflowing_kernel(&t, 64);
    return 0;
  }
  if (mode == "stress" && argc == 4) {
    int threads = std::atoi(argv[2]), calls = std::atoi(argv[3]);
    std::vector<const DLTensor*> many(40, &t);  // a record of several KB
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&, i] {
        for (int c = 0; c < calls; ++c) payload(many, i * 100000 + c, std::string(100, 'x'));
      });
    }
    for (auto& th : pool) th.join();
    return 0;
  }
  return 2;
}
