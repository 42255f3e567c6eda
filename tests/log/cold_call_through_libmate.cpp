// The logging path's trampoline reached the way a downstream program reaches it: through
// libmate.so, linked with lazy binding (this program's link options). Its first call is the
// process's first to the trampoline, made as cold_call makes it (MATE_LOG_COLD_CALL_ASM); every
// general-purpose register an ordinary call may change must come back as it was. Before the call
// went through the GOT, the dynamic linker's lazy resolver ran on that first call and changed
// r11 (the benchmark bench_log_records_shared crashed on it: the compiler had kept a pointer in
// r11 across a logged call). A plain program, not a gtest one: the test main links MATE's
// components statically, and this must be the only MATE in the process.
#include <cstdint>
#include <cstdio>

#include "mate/log/api.hpp"

#if defined(MATE_LOG_COLD_CALL_TRAMPOLINE)
namespace {

// Sets every register an ordinary call may change to -1.
void* clobber(void* arg) noexcept {
  asm volatile(
      "movq $-1, %%rcx\n\t movq $-1, %%rdx\n\t movq $-1, %%rsi\n\t movq $-1, %%rdi\n\t"
      "movq $-1, %%r8\n\t movq $-1, %%r9\n\t movq $-1, %%r10\n\t movq $-1, %%r11\n\t"
      :
      :
      : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "cc");
  return arg;
}

}  // namespace

int main() {
  const char* const names[] = {"rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "rdi", "rsi"};
  int failures = 0;
  for (int call = 1; call <= 2; ++call) {  // the first through the resolver (were it reached), then not
    std::uint64_t in[9] = {}, out[9] = {};
    for (int i = 0; i < 7; ++i) in[i] = 0x1111111111111111ULL * static_cast<std::uint64_t>(i + 1);
    int marker = 10;
    void* result = nullptr;
    auto fn = &clobber;
    in[7] = reinterpret_cast<std::uint64_t>(fn);
    in[8] = reinterpret_cast<std::uint64_t>(&marker);
    asm volatile(
        "movq 0(%[in]), %%rbx\n\t movq 8(%[in]), %%rcx\n\t movq 16(%[in]), %%rdx\n\t"
        "movq 24(%[in]), %%r8\n\t movq 32(%[in]), %%r9\n\t movq 40(%[in]), %%r10\n\t"
        "movq 48(%[in]), %%r11\n\t" MATE_LOG_COLD_CALL_ASM
        "movq %%rbx, 0(%[out])\n\t movq %%rcx, 8(%[out])\n\t movq %%rdx, 16(%[out])\n\t"
        "movq %%r8, 24(%[out])\n\t movq %%r9, 32(%[out])\n\t movq %%r10, 40(%[out])\n\t"
        "movq %%r11, 48(%[out])\n\t movq %%rdi, 56(%[out])\n\t movq %%rsi, 64(%[out])\n\t"
        : "=&a"(result)
        : "D"(fn), "S"(&marker), [in] "r"(in), [out] "r"(out)
        : "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc");
    if (result != &marker) {
      std::printf("call %d: the result is %p, not fn's %p\n", call, result, static_cast<void*>(&marker));
      ++failures;
    }
    for (int i = 0; i < 9; ++i) {
      if (out[i] != in[i]) {
        std::printf("call %d: %s is %#llx, was %#llx\n", call, names[i], static_cast<unsigned long long>(out[i]),
                    static_cast<unsigned long long>(in[i]));
        ++failures;
      }
    }
  }
  if (failures == 0) std::printf("every register kept, through libmate.so with lazy binding\n");
  return failures == 0 ? 0 : 1;
}
#else
int main() {
  std::printf("no trampoline on this platform (cold_call is an ordinary call)\n");
  return 0;
}
#endif
