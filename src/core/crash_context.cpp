// Lock-free provider table: registration may race with a crash on another thread.
#include "mate/core/crash_context.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>

namespace mate::core {

namespace {
constexpr int kMaxProviders = 8;
std::atomic<CrashContextProvider> providers[kMaxProviders];
}  // namespace

bool register_crash_context_here(CrashContextProvider provider) noexcept {
  for (auto& slot : providers) {
    CrashContextProvider current = slot.load(std::memory_order_acquire);
    if (current == provider) return true;
    if (current == nullptr && slot.compare_exchange_strong(current, provider)) return true;
    if (current == provider) return true;
  }
  return false;
}

bool register_crash_context(CrashContextProvider provider) noexcept {
  const bool here = register_crash_context_here(provider);
  // Looked up once: a preload is there from the start or not at all. dlsym takes the dynamic
  // loader's lock, so callers register outside their own locks (src/log/settings.cpp).
  using Registrar = int (*)(CrashContextProvider) noexcept;
  static const auto preload = reinterpret_cast<Registrar>(dlsym(RTLD_DEFAULT, kPreloadCrashContextRegistrar));
  if (preload != nullptr) preload(provider);
  return here;
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
