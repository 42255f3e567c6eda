// Keeps allocating until the guard has used up the system's memory-map entries
// (vm.max_map_count), then goes on allocating, small and large, and checks every block: under
// `mate guard-run` the allocations past the limit must come from the real allocator (the guard
// says so once), never fail, in the main thread and in a thread that starts allocating only then,
// and new threads can still be started (the guard leaves the program memory-map entries).
// Prints "ok <live allocations>".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::atol(argv[1]) : 40000;
  std::mutex mutex;
  std::condition_variable wake;
  bool go = false;
  bool thread_ok = true;
  std::thread late([&] {
    std::unique_lock lock(mutex);
    wake.wait(lock, [&] { return go; });
    for (std::size_t size : {64u, 300000u}) {
      char* p = static_cast<char*>(std::malloc(size));
      if (p == nullptr) {
        std::printf("thread malloc(%zu) failed\n", size);
        thread_ok = false;
        return;
      }
      p[size - 1] = 2;
      std::free(p);
    }
  });
  std::vector<char*> blocks;
  blocks.reserve(static_cast<std::size_t>(count) + 64);
  for (long i = 0; i < count; ++i) {
    char* p = static_cast<char*>(std::malloc(24));
    if (p == nullptr) {
      std::printf("malloc(24) failed at %ld\n", i);
      std::fflush(stdout), std::_Exit(1);
    }
    std::memset(p, static_cast<int>(i & 0x7f), 24);
    blocks.push_back(p);
  }
  // Past the limit: large blocks (glibc's mmap threshold is 128 KiB) and realloc too.
  for (std::size_t size : {100u, 5000u, 200000u, 3000000u}) {
    char* p = static_cast<char*>(std::calloc(1, size));
    if (p == nullptr) {
      std::printf("calloc(%zu) failed\n", size);
      std::fflush(stdout), std::_Exit(1);
    }
    p[size - 1] = 1;
    p = static_cast<char*>(std::realloc(p, size * 2));
    if (p == nullptr) {
      std::printf("realloc(%zu) failed\n", size * 2);
      std::fflush(stdout), std::_Exit(1);
    }
    std::free(p);
  }
  // A thread started before the limit (a new thread needs a stack mapping) that allocates for
  // the first time past it: glibc would give it an arena of its own, a new mapping.
  {
    std::lock_guard lock(mutex);
    go = true;
  }
  wake.notify_one();
  late.join();
  if (!thread_ok) return 1;
  // New threads past the limit: each needs mappings of its own (a stack and its guard page), which
  // the guard must have left to the program.
  for (int i = 0; i < 16; ++i) {
    bool ran = false;
    try {
      std::thread t([&] {
        char* p = static_cast<char*>(std::malloc(1000));
        ran = p != nullptr;
        std::free(p);
      });
      t.join();
    } catch (const std::system_error& e) {
      std::printf("new thread %d past the limit: %s\n", i, e.what());
      return 1;
    }
    if (!ran) return 1;
  }
  for (long i = 0; i < count; ++i) {
    if (blocks[static_cast<std::size_t>(i)][23] != static_cast<char>(i & 0x7f)) {
      std::printf("block %ld changed\n", i);
      return 1;
    }
    std::free(blocks[static_cast<std::size_t>(i)]);
  }
  std::printf("ok %ld\n", count);
  return 0;
}
