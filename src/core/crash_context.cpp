// Lock-free provider table: registration may race with a crash on another thread.
#include "mate/core/crash_context.hpp"

#include <unistd.h>

#include <atomic>

namespace mate::core {

namespace {
constexpr int kMaxProviders = 8;
std::atomic<CrashContextProvider> providers[kMaxProviders];
}  // namespace

bool register_crash_context(CrashContextProvider provider) noexcept {
  for (auto& slot : providers) {
    CrashContextProvider current = slot.load(std::memory_order_acquire);
    if (current == provider) return true;
    if (current == nullptr && slot.compare_exchange_strong(current, provider)) return true;
    if (current == provider) return true;
  }
  return false;
}

void write_crash_context(int fd) noexcept {
  char buffer[1024];
  for (auto& slot : providers) {
    CrashContextProvider provider = slot.load(std::memory_order_acquire);
    if (provider == nullptr) continue;
    std::size_t n = provider(buffer, sizeof buffer);
    if (n > sizeof buffer) n = sizeof buffer;
    std::size_t done = 0;
    while (done < n) {
      ssize_t w = ::write(fd, buffer + done, n - done);
      if (w <= 0) break;
      done += static_cast<std::size_t>(w);
    }
  }
}

}  // namespace mate::core
