// A JIT-like program: it registers unwind information for generated code with the process's C++
// unwinder (__register_frame) and walks the stack through that code. libgcc_s sorts registered
// frames on first use, calling malloc while holding its own lock; under `mate guard-run` that
// malloc is guarded and captures a backtrace, which must not go through the same unwinder (a
// deadlock). The alarm turns a hang into a failure. x86-64 only (the generated code is x86-64).
#include <sys/mman.h>
#include <unistd.h>
#include <unwind.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" void __register_frame(void*);

namespace {

int g_frames = 0;

_Unwind_Reason_Code count_frame(_Unwind_Context*, void*) {
  ++g_frames;
  return _URC_NO_REASON;
}

__attribute__((noinline)) void walk() { _Unwind_Backtrace(count_frame, nullptr); }

alignas(8) unsigned char g_eh_frame[64];

void put32(unsigned char* p, std::uint32_t v) { std::memcpy(p, &v, 4); }

// One CIE and one FDE for the 16 bytes of code at `code`: CFA = rsp + 8 on entry, rsp + 16
// after its `sub rsp, 8`; the return address at CFA - 8.
void build_eh_frame(std::uintptr_t code) {
  unsigned char* p = g_eh_frame;
  unsigned char* cie = p;
  p += 4;
  put32(p, 0);  // CIE id
  p += 4;
  const unsigned char cie_body[] = {1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x04, 0x0c, 7, 8, 0x90, 1};
  std::memcpy(p, cie_body, sizeof cie_body);  // version, "zR", alignments, RA column, udata8 pointers, rules
  p += sizeof cie_body;
  while ((p - cie - 4) % 8 != 0) *p++ = 0;
  put32(cie, static_cast<std::uint32_t>(p - cie - 4));
  unsigned char* fde = p;
  p += 4;
  put32(p, static_cast<std::uint32_t>(p - cie));  // CIE pointer
  p += 4;
  const std::uint64_t start = code, range = 16;
  std::memcpy(p, &start, 8);
  p += 8;
  std::memcpy(p, &range, 8);
  p += 8;
  const unsigned char fde_body[] = {0, 0x44, 0x0e, 0x10};  // no augmentation; advance 4; CFA offset 16
  std::memcpy(p, fde_body, sizeof fde_body);
  p += sizeof fde_body;
  while ((p - fde - 4) % 8 != 0) *p++ = 0;
  put32(fde, static_cast<std::uint32_t>(p - fde - 4));
  put32(p, 0);  // terminator
}

}  // namespace

int main() {
#if defined(__x86_64__)
  alarm(20);
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (code == MAP_FAILED) return 1;
  build_eh_frame(reinterpret_cast<std::uintptr_t>(code));
  __register_frame(g_eh_frame);
  // sub rsp, 8; call rdi; add rsp, 8; ret
  const unsigned char stub[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd7, 0x48, 0x83, 0xc4, 0x08, 0xc3};
  std::memcpy(code, stub, sizeof stub);
  reinterpret_cast<void (*)(void (*)())>(code)(walk);
  std::printf("walked %d frames\n", g_frames);
#else
  std::printf("walked 0 frames (not x86-64)\n");
#endif
  return 0;
}
