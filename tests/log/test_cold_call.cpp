// The logging path's trampoline (src/log/cold_call.cpp) must leave every register as it found
// it, whichever of its three ways it saves them: xmm0-15 by moves (only SSE state in use), ymm0-15
// by moves (AVX upper halves in use), opmasks and zmm16-31 by moves as well (in use: AVX-512
// CPUs), or the whole state (x87 or MMX registers holding values, zmm0-15's upper halves). Each
// test also checks which way was taken. Not tested here: the FXSAVE/XSAVE fallbacks of CPUs
// without XSAVEC/XINUSE, and AVX-512 CPUs without AVX512BW.
// Each test loads known values into registers, calls the trampoline with a function that
// overwrites them all, and compares, from one asm statement so that the compiler keeps nothing of
// its own there.
#include <cpuid.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "mate/log/api.hpp"

#if defined(MATE_LOG_COLD_CALL_TRAMPOLINE)
namespace {

constexpr std::uint32_t kTowardZero = 0x6000;  // MXCSR rounding control bits

// Overwrites every vector register, MXCSR's rounding and flags, every general-purpose register
// a call may change, raises the x87 divide-by-zero flag, and pushes eight values on the x87 stack
// (a stack that already held values overflows) before popping them again.
void* clobber_sse(void* arg) noexcept {
  asm volatile(
      "movq $-1, %%rcx\n\t movq $-1, %%rdx\n\t movq $-1, %%rsi\n\t movq $-1, %%rdi\n\t"
      "movq $-1, %%r8\n\t movq $-1, %%r9\n\t movq $-1, %%r10\n\t movq $-1, %%r11\n\t"
      "fldz\n\t fld1\n\t fdivp\n\t fstp %%st(0)\n\t fld1\n\t fldz\n\t fdivp\n\t fstp %%st(0)\n\t"
      :
      :
      : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "cc");
  asm volatile(
      "pcmpeqd %%xmm0, %%xmm0\n\t"
      "movdqa %%xmm0, %%xmm1\n\t movdqa %%xmm0, %%xmm2\n\t movdqa %%xmm0, %%xmm3\n\t"
      "movdqa %%xmm0, %%xmm4\n\t movdqa %%xmm0, %%xmm5\n\t movdqa %%xmm0, %%xmm6\n\t"
      "movdqa %%xmm0, %%xmm7\n\t movdqa %%xmm0, %%xmm8\n\t movdqa %%xmm0, %%xmm9\n\t"
      "movdqa %%xmm0, %%xmm10\n\t movdqa %%xmm0, %%xmm11\n\t movdqa %%xmm0, %%xmm12\n\t"
      "movdqa %%xmm0, %%xmm13\n\t movdqa %%xmm0, %%xmm14\n\t movdqa %%xmm0, %%xmm15\n\t"
      "fldz\n\t fldz\n\t fldz\n\t fldz\n\t fldz\n\t fldz\n\t fldz\n\t fldz\n\t"
      "fstp %%st(0)\n\t fstp %%st(0)\n\t fstp %%st(0)\n\t fstp %%st(0)\n\t"
      "fstp %%st(0)\n\t fstp %%st(0)\n\t fstp %%st(0)\n\t fstp %%st(0)\n\t"
      :
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "memory");
  std::uint32_t mxcsr = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  mxcsr = (mxcsr | kTowardZero | 0x3f);  // round toward zero, every exception flag raised
  asm volatile("ldmxcsr %0" : : "m"(mxcsr));
  return arg;
}

// The same, and the upper halves of ymm0-15 too (left dirty: the trampoline must undo that).
__attribute__((target("avx"))) void* clobber_avx(void* arg) noexcept {
  asm volatile(
      "vpcmpeqd %%xmm0, %%xmm0, %%xmm0\n\t vinsertf128 $1, %%xmm0, %%ymm0, %%ymm0\n\t"
      "vmovdqa %%ymm0, %%ymm1\n\t vmovdqa %%ymm0, %%ymm2\n\t vmovdqa %%ymm0, %%ymm3\n\t"
      "vmovdqa %%ymm0, %%ymm4\n\t vmovdqa %%ymm0, %%ymm5\n\t vmovdqa %%ymm0, %%ymm6\n\t"
      "vmovdqa %%ymm0, %%ymm7\n\t vmovdqa %%ymm0, %%ymm8\n\t vmovdqa %%ymm0, %%ymm9\n\t"
      "vmovdqa %%ymm0, %%ymm10\n\t vmovdqa %%ymm0, %%ymm11\n\t vmovdqa %%ymm0, %%ymm12\n\t"
      "vmovdqa %%ymm0, %%ymm13\n\t vmovdqa %%ymm0, %%ymm14\n\t vmovdqa %%ymm0, %%ymm15\n\t"
      :
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "memory");
  return clobber_sse(arg);
}

bool has_avx() { return __builtin_cpu_supports("avx"); }

// Whether the trampoline can take its fast paths here: XSAVE enabled by the OS and XINUSE
// readable (XGETBV with ECX=1).
bool has_xinuse() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (3u << 26)) != (3u << 26)) return false;
  if (__get_cpuid_count(0xd, 1, &a, &b, &c, &d) == 0) return false;
  return (a & 4u) != 0;
}

// The CPU has the AVX-512 the trampoline saves by moves (AVX512F, AVX512BW, enabled by the OS).
bool has_avx512bw() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"); }

// The AVX-512 components in use now (XINUSE bits 5-7: opmasks, the upper halves of zmm0-15,
// zmm16-31). On a CPU with AVX-512 the C library's string functions use ymm16-31 and opmasks
// (EVEX forms need no vzeroupper), which leaves those in use nearly all the time.
unsigned avx512_in_use() {
  if (!has_xinuse()) return 0;
  unsigned lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return lo & 0xe0u;
}

// How many whole-state saves one trampoline call entered now, with no x87 value, must make: none
// where the CPU tells what is in use (XINUSE), zmm0-15's upper halves are not, and opmasks and
// zmm16-31 are not or can be moved (AVX512BW); else one.
std::uint64_t full_saves_expected() {
  const unsigned avx512 = avx512_in_use();
  const bool fast = has_xinuse() && (avx512 & 0x40u) == 0 && ((avx512 & 0xa0u) == 0 || has_avx512bw());
  return fast ? 0u : 1u;
}

// Counts the trampoline's whole-state saves across `body`.
template <class Body>
std::uint64_t full_saves_during(Body body) {
  const std::uint64_t before = mate::log::detail::cold_call_full_saves_for_testing();
  body();
  return mate::log::detail::cold_call_full_saves_for_testing() - before;
}

using Lanes = std::array<std::uint8_t, 32>;
std::array<Lanes, 16> patterns() {
  std::array<Lanes, 16> p{};
  for (int r = 0; r < 16; ++r)
    for (int b = 0; b < 32; ++b) p[r][b] = static_cast<std::uint8_t>(r * 37 + b * 11 + 1);
  return p;
}

#define MATE_XMM_CLOBBERS                                                                                       \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
      "xmm13", "xmm14", "xmm15"
#define MATE_CALL_TRAMPOLINE MATE_LOG_COLD_CALL_ASM  // the call cold_call makes

// xmm0-15 hold values, the upper halves are clean (vzeroupper, where the CPU has AVX): after the
// call the low halves are as they were and the upper halves clean again; MXCSR as it was.
TEST(ColdCall, KeepsXmmRegistersAndLeavesUpperHalvesClean) {
  for (auto fn : {&clobber_sse, &clobber_avx}) {
    if (fn == &clobber_avx && !has_avx()) continue;
    const std::array<Lanes, 16> in = patterns();
    alignas(32) std::array<Lanes, 16> out{};
    std::uint32_t mxcsr_before = 0, mxcsr_after = 0;
    int marker = 5;
    void* result = nullptr;
    asm volatile("stmxcsr %[mb]\n\t" : [mb] "=m"(mxcsr_before));
    if (has_avx()) asm volatile("vzeroupper" ::: MATE_XMM_CLOBBERS);
    const std::uint64_t full_before = mate::log::detail::cold_call_full_saves_for_testing();
    const std::uint64_t full_expected = full_saves_expected();
    asm volatile(
        "movdqu 0(%[in]), %%xmm0\n\t movdqu 32(%[in]), %%xmm1\n\t movdqu 64(%[in]), %%xmm2\n\t"
        "movdqu 96(%[in]), %%xmm3\n\t movdqu 128(%[in]), %%xmm4\n\t movdqu 160(%[in]), %%xmm5\n\t"
        "movdqu 192(%[in]), %%xmm6\n\t movdqu 224(%[in]), %%xmm7\n\t movdqu 256(%[in]), %%xmm8\n\t"
        "movdqu 288(%[in]), %%xmm9\n\t movdqu 320(%[in]), %%xmm10\n\t movdqu 352(%[in]), %%xmm11\n\t"
        "movdqu 384(%[in]), %%xmm12\n\t movdqu 416(%[in]), %%xmm13\n\t movdqu 448(%[in]), %%xmm14\n\t"
        "movdqu 480(%[in]), %%xmm15\n\t" MATE_CALL_TRAMPOLINE
        "movdqu %%xmm0, 0(%[out])\n\t movdqu %%xmm1, 32(%[out])\n\t movdqu %%xmm2, 64(%[out])\n\t"
        "movdqu %%xmm3, 96(%[out])\n\t movdqu %%xmm4, 128(%[out])\n\t movdqu %%xmm5, 160(%[out])\n\t"
        "movdqu %%xmm6, 192(%[out])\n\t movdqu %%xmm7, 224(%[out])\n\t movdqu %%xmm8, 256(%[out])\n\t"
        "movdqu %%xmm9, 288(%[out])\n\t movdqu %%xmm10, 320(%[out])\n\t movdqu %%xmm11, 352(%[out])\n\t"
        "movdqu %%xmm12, 384(%[out])\n\t movdqu %%xmm13, 416(%[out])\n\t movdqu %%xmm14, 448(%[out])\n\t"
        "movdqu %%xmm15, 480(%[out])\n\t stmxcsr %[ma]\n\t"
        : "=&a"(result), [ma] "=m"(mxcsr_after)
        : "D"(fn), "S"(&marker), [in] "r"(in.data()), [out] "r"(out.data())
        : MATE_XMM_CLOBBERS, "memory", "cc");
    EXPECT_EQ(mate::log::detail::cold_call_full_saves_for_testing() - full_before, full_expected)
        << "the fast path where no AVX-512 state is in use, else the whole state";
    EXPECT_EQ(result, &marker);
    EXPECT_EQ(mxcsr_after, mxcsr_before);
    for (int r = 0; r < 16; ++r)
      EXPECT_EQ(std::memcmp(out[r].data(), in[r].data(), 16), 0) << "xmm" << r << (fn == &clobber_avx ? " (avx clobber)" : "");
    if (has_avx()) {
      // The upper halves: clean before the call, dirtied by clobber_avx, clean again after it.
      alignas(32) Lanes upper{};
      asm volatile(
          "movdqu 0(%[in]), %%xmm0\n\t" MATE_CALL_TRAMPOLINE "vextractf128 $1, %%ymm0, %%xmm1\n\t movdqu %%xmm1, (%[up])\n\t"
          : "=&a"(result)
          : "D"(fn), "S"(&marker), [in] "r"(in.data()), [up] "r"(upper.data())
          : MATE_XMM_CLOBBERS, "memory", "cc");
      EXPECT_EQ(upper, Lanes{}) << "ymm0's upper half is dirty after the call";
    }
  }
}

// ymm0-15 hold values in full (the upper halves in use): all 256 bits come back.
__attribute__((target("avx"))) void ymm_round_trip(const Lanes* in, Lanes* out, void** result, void* fn, void* arg) {
  asm volatile(
      "vmovdqu 0(%[in]), %%ymm0\n\t vmovdqu 32(%[in]), %%ymm1\n\t vmovdqu 64(%[in]), %%ymm2\n\t"
      "vmovdqu 96(%[in]), %%ymm3\n\t vmovdqu 128(%[in]), %%ymm4\n\t vmovdqu 160(%[in]), %%ymm5\n\t"
      "vmovdqu 192(%[in]), %%ymm6\n\t vmovdqu 224(%[in]), %%ymm7\n\t vmovdqu 256(%[in]), %%ymm8\n\t"
      "vmovdqu 288(%[in]), %%ymm9\n\t vmovdqu 320(%[in]), %%ymm10\n\t vmovdqu 352(%[in]), %%ymm11\n\t"
      "vmovdqu 384(%[in]), %%ymm12\n\t vmovdqu 416(%[in]), %%ymm13\n\t vmovdqu 448(%[in]), %%ymm14\n\t"
      "vmovdqu 480(%[in]), %%ymm15\n\t" MATE_CALL_TRAMPOLINE
      "vmovdqu %%ymm0, 0(%[out])\n\t vmovdqu %%ymm1, 32(%[out])\n\t vmovdqu %%ymm2, 64(%[out])\n\t"
      "vmovdqu %%ymm3, 96(%[out])\n\t vmovdqu %%ymm4, 128(%[out])\n\t vmovdqu %%ymm5, 160(%[out])\n\t"
      "vmovdqu %%ymm6, 192(%[out])\n\t vmovdqu %%ymm7, 224(%[out])\n\t vmovdqu %%ymm8, 256(%[out])\n\t"
      "vmovdqu %%ymm9, 288(%[out])\n\t vmovdqu %%ymm10, 320(%[out])\n\t vmovdqu %%ymm11, 352(%[out])\n\t"
      "vmovdqu %%ymm12, 384(%[out])\n\t vmovdqu %%ymm13, 416(%[out])\n\t vmovdqu %%ymm14, 448(%[out])\n\t"
      "vmovdqu %%ymm15, 480(%[out])\n\t vzeroupper\n\t"
      : "=&a"(*result)
      : "D"(fn), "S"(arg), [in] "r"(in), [out] "r"(out)
      : MATE_XMM_CLOBBERS, "memory", "cc");
}

// zmm16-31 and k0-7 hold values (as the C library's EVEX functions leave them on an AVX-512
// CPU); fn overwrites them all: after the call they are as they were, taken the fast way.
using Zmm = std::array<std::uint8_t, 64>;
#define MATE_AVX512_CLOBBERS                                                                                  \
  "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", \
      "xmm28", "xmm29", "xmm30", "xmm31", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"
__attribute__((target("avx512f,avx512bw"))) void* clobber_avx512(void* arg) noexcept {
  asm volatile(
      "vpternlogd $0xff, %%zmm16, %%zmm16, %%zmm16\n\t"
      ".irp n, 17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n\t vmovdqa64 %%zmm16, %%zmm\\n\n\t .endr\n\t"
      "kxnorq %%k0, %%k0, %%k0\n\t"
      ".irp n, 1,2,3,4,5,6,7\n\t kmovq %%k0, %%k\\n\n\t .endr\n\t"
      :
      :
      : MATE_AVX512_CLOBBERS, "memory");
  return clobber_sse(arg);
}

// Writes all of zmm0 (its upper half included: XINUSE bit 6), then clobbers as clobber_sse does.
__attribute__((target("avx512f,avx512bw"))) void* clobber_zmm0(void* arg) noexcept {
  asm volatile("vpternlogd $0xff, %%zmm0, %%zmm0, %%zmm0\n\t" : : : "xmm0", "memory");
  return clobber_sse(arg);
}

// zmm16-31 and k0-7 loaded from `in` and `masks_in`, ymm0 too when `ymm0_in` is given (AVX
// upper halves in use: the ymm path; else, after a vzeroupper, the xmm path); the trampoline
// called; the registers and XINUSE stored after it.
struct Avx512RoundTrip {
  std::array<Zmm, 16> zmm{};
  std::array<std::uint64_t, 8> masks{};
  Lanes ymm0{};
  unsigned in_use = 0;
  void* result = nullptr;
};
__attribute__((target("avx512f,avx512bw"))) void avx512_round_trip(const std::array<Zmm, 16>& in,
                                                                   const std::array<std::uint64_t, 8>& masks_in,
                                                                   const Lanes* ymm0_in, void* fn, void* arg,
                                                                   Avx512RoundTrip& out) {
  asm volatile(
      "vzeroupper\n\t testq %[yin], %[yin]\n\t jz 1f\n\t vmovdqu (%[yin]), %%ymm0\n"
      "1:\n\t"
      ".irp n, 16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n\t"
      " vmovdqu64 ((\\n - 16) * 64)(%[in]), %%zmm\\n\n\t .endr\n\t"
      ".irp n, 0,1,2,3,4,5,6,7\n\t kmovq (\\n * 8)(%[mi]), %%k\\n\n\t .endr\n\t"
      MATE_CALL_TRAMPOLINE
      "movq %%rax, %[result]\n\t"
      ".irp n, 16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n\t"
      " vmovdqu64 %%zmm\\n, ((\\n - 16) * 64)(%[out])\n\t .endr\n\t"
      ".irp n, 0,1,2,3,4,5,6,7\n\t kmovq %%k\\n, (\\n * 8)(%[mo])\n\t .endr\n\t"
      "vmovdqu %%ymm0, (%[yout])\n\t"
      "movl $1, %%ecx\n\t xgetbv\n\t movl %%eax, %[in_use]\n\t vzeroupper\n\t"
      : [result] "=m"(out.result), [in_use] "=m"(out.in_use)
      : "D"(fn), "S"(arg), [in] "r"(in.data()), [mi] "r"(masks_in.data()), [out] "r"(out.zmm.data()),
        [mo] "r"(out.masks.data()), [yin] "r"(ymm0_in), [yout] "r"(out.ymm0.data())
      : "rax", "rcx", "rdx", MATE_XMM_CLOBBERS, MATE_AVX512_CLOBBERS, "memory", "cc");
}

TEST(ColdCall, KeepsOpmasksAndZmm16To31) {
  if (!has_avx512bw() || !has_xinuse()) GTEST_SKIP() << "no AVX512F/AVX512BW (or no XINUSE) on this CPU";
  std::array<Zmm, 16> in{};
  std::array<std::uint64_t, 8> masks_in{};
  for (int r = 0; r < 16; ++r)
    for (int b = 0; b < 64; ++b) in[r][b] = static_cast<std::uint8_t>(r * 64 + b + 1);
  for (int k = 0; k < 8; ++k) masks_in[k] = 0x0123456789abcdefull * static_cast<std::uint64_t>(k + 1);
  const Lanes ymm0 = patterns()[0];
  for (const bool ymm_path : {false, true}) {
    for (auto fn : {&clobber_sse, &clobber_avx512, &clobber_zmm0}) {
      const std::string which = std::string(ymm_path ? "ymm path, " : "xmm path, ") +
                                (fn == &clobber_sse ? "sse" : fn == &clobber_avx512 ? "zmm16-31 and k0-7" : "zmm0");
      int marker = 10;
      Avx512RoundTrip out;
      const std::uint64_t full = full_saves_during(
          [&] { avx512_round_trip(in, masks_in, ymm_path ? &ymm0 : nullptr, reinterpret_cast<void*>(fn), &marker, out); });
      EXPECT_EQ(full, 0u) << which << ": opmasks and zmm16-31 in use: moved, not the whole state";
      EXPECT_EQ(out.result, &marker) << which;
      for (int r = 0; r < 16; ++r) EXPECT_EQ(out.zmm[r], in[r]) << which << ": zmm" << r + 16;
      for (int k = 0; k < 8; ++k) EXPECT_EQ(out.masks[k], masks_in[k]) << which << ": k" << k;
      if (ymm_path) {
        EXPECT_EQ(out.ymm0, ymm0) << which;
      }
      // zmm0-15's upper halves: not in use before the call, not in use after it (else the
      // caller's next calls take the whole-state path).
      EXPECT_EQ(out.in_use & 0x40u, 0u) << which << std::hex << ": XINUSE " << out.in_use;
    }
  }
}

// The AVX-512 state fn leaves behind when the caller had none in use: put back in its initial
// state (as it was), not left to the caller, whose next calls would take the whole-state path.
// `fn` runs with ymm0 holding `ymm0_in` (AVX upper halves in use: the ymm path) and no AVX-512
// component in use (an XRSTOR of them from an empty header first).
struct LeftBehind {
  void* result = nullptr;
  unsigned in_use = 0;  // XINUSE after the call
  Zmm zmm16{};
  std::uint64_t k1 = 0;
  Lanes ymm0{};
};
__attribute__((target("avx512f,avx512bw"))) LeftBehind call_with_no_avx512_state(void* fn, void* arg, const Lanes& ymm0_in) {
  alignas(64) static const unsigned char kEmptyXsaveArea[576] = {};
  LeftBehind out;
  asm volatile(
      "movl $0xe0, %%eax\n\t xorl %%edx, %%edx\n\t xrstor64 (%[empty])\n\t"
      "vmovdqu (%[yin]), %%ymm0\n\t" MATE_CALL_TRAMPOLINE
      "movq %%rax, %[result]\n\t"
      "movl $1, %%ecx\n\t xgetbv\n\t movl %%eax, %[in_use]\n\t"
      "vmovdqu64 %%zmm16, (%[z16])\n\t kmovq %%k1, %[k1]\n\t vmovdqu %%ymm0, (%[yout])\n\t vzeroupper\n\t"
      : [result] "=m"(out.result), [in_use] "=m"(out.in_use), [k1] "=m"(out.k1)
      : "D"(fn), "S"(arg), [empty] "r"(kEmptyXsaveArea), [yin] "r"(ymm0_in.data()), [z16] "r"(out.zmm16.data()),
        [yout] "r"(out.ymm0.data())
      : "rax", "rcx", "rdx", MATE_XMM_CLOBBERS, MATE_AVX512_CLOBBERS, "memory", "cc");
  return out;
}

TEST(ColdCall, PutsBackTheAvx512StateTheCallLeftInUse) {
  if (!has_avx512bw() || !has_xinuse()) GTEST_SKIP() << "no AVX512F/AVX512BW (or no XINUSE) on this CPU";
  const Lanes ymm0 = patterns()[0];
  for (auto fn : {&clobber_avx512, &clobber_zmm0}) {
    int marker = 11;
    LeftBehind after;
    const std::uint64_t full = full_saves_during(
        [&] { after = call_with_no_avx512_state(reinterpret_cast<void*>(fn), &marker, ymm0); });
    const char* which = fn == &clobber_zmm0 ? "zmm0" : "zmm16-31 and k0-7";
    EXPECT_EQ(full, 0u) << which;
    EXPECT_EQ(after.result, &marker) << which;
    EXPECT_EQ(after.in_use & 0xe0u, 0u) << std::hex << "XINUSE " << after.in_use << " after " << which;
    EXPECT_EQ(after.zmm16, Zmm{}) << which;
    EXPECT_EQ(after.k1, 0u) << which;
    EXPECT_EQ(after.ymm0, ymm0) << which;
  }
}

TEST(ColdCall, KeepsYmmRegistersWhoseUpperHalvesAreInUse) {
  if (!has_avx()) GTEST_SKIP() << "no AVX on this CPU";
  for (auto fn : {&clobber_sse, &clobber_avx}) {
    const std::array<Lanes, 16> in = patterns();
    std::array<Lanes, 16> out{};
    int marker = 6;
    void* result = nullptr;
    const std::uint64_t full_expected = full_saves_expected();
    const std::uint64_t full = full_saves_during(
        [&] { ymm_round_trip(in.data(), out.data(), &result, reinterpret_cast<void*>(fn), &marker); });
    EXPECT_EQ(full, full_expected) << "the fast path where no AVX-512 state is in use, else the whole state";
    EXPECT_EQ(result, &marker);
    for (int r = 0; r < 16; ++r) EXPECT_EQ(out[r], in[r]) << "ymm" << r;
  }
}

// Two values on the x87 stack (a long double kept in registers): the callee's eight pushes would
// overflow it; the trampoline saves the whole state and the values come back.
TEST(ColdCall, KeepsValuesOnTheX87Stack) {
  for (auto fn : {&clobber_sse, &clobber_avx}) {
    if (fn == &clobber_avx && !has_avx()) continue;
    const long double a = 1.25L, b = -3.5L;
    long double top = 0, second = 0;
    int marker = 7;
    void* result = nullptr;
    const std::array<Lanes, 16> in = patterns();
    std::array<Lanes, 16> out{};
    const std::uint64_t full_before = mate::log::detail::cold_call_full_saves_for_testing();
    asm volatile(
        "fldt (%[a])\n\t fldt (%[b])\n\t movdqu 0(%[in]), %%xmm3\n\t" MATE_CALL_TRAMPOLINE
        "fstpt (%[top])\n\t fstpt (%[second])\n\t movdqu %%xmm3, 96(%[out])\n\t"
        : "=&a"(result)
        : "D"(fn), "S"(&marker), [a] "r"(&a), [b] "r"(&b), [top] "r"(&top), [second] "r"(&second), [in] "r"(in.data()),
          [out] "r"(out.data())
        : MATE_XMM_CLOBBERS, "memory", "cc");
    EXPECT_EQ(result, &marker);
    EXPECT_EQ(mate::log::detail::cold_call_full_saves_for_testing() - full_before, 1u) << "x87 values need the whole state";
    EXPECT_EQ(top, b);
    EXPECT_EQ(second, a);
    EXPECT_EQ(std::memcmp(out[3].data(), in[0].data(), 16), 0);
  }
}

// An MMX register in use (every x87 register tagged full): the whole state, the value kept.
TEST(ColdCall, KeepsMmxRegisters) {
  for (auto fn : {&clobber_sse, &clobber_avx}) {
    if (fn == &clobber_avx && !has_avx()) continue;
    const std::uint64_t in = 0x0123456789abcdefULL;
    std::uint64_t out = 0;
    int marker = 8;
    void* result = nullptr;
    const std::uint64_t full = full_saves_during([&] {
      asm volatile("movq (%[in]), %%mm2\n\t" MATE_CALL_TRAMPOLINE "movq %%mm2, (%[out])\n\t emms\n\t"
                   : "=&a"(result)
                   : "D"(fn), "S"(&marker), [in] "r"(&in), [out] "r"(&out)
                   : MATE_XMM_CLOBBERS, "memory", "cc");
    });
    EXPECT_EQ(full, 1u) << "MMX values need the whole state";
    EXPECT_EQ(result, &marker);
    EXPECT_EQ(out, in);
  }
}

// No x87 value, but x87 state in use: the status word (condition codes, exception flags) comes
// back as it was, although fn raises divide-by-zero; the fast path, where the CPU has XINUSE.
TEST(ColdCall, KeepsTheX87StatusWordOnTheFastPath) {
  for (auto fn : {&clobber_sse, &clobber_avx}) {
    if (fn == &clobber_avx && !has_avx()) continue;
    std::uint16_t before = 0, after = 0;
    int marker = 9;
    void* result = nullptr;
    const std::uint64_t full_expected = full_saves_expected();
    const std::uint64_t full = full_saves_during([&] {
      // fxam of the empty register sets C3 and C0: a status word fn's arithmetic changes.
      asm volatile("fnclex\n\t fxam\n\t fnstsw %[b]\n\t" MATE_CALL_TRAMPOLINE "fnstsw %[a]\n\t"
                   : "=&a"(result), [b] "=m"(before), [a] "=m"(after)
                   : "D"(fn), "S"(&marker)
                   : MATE_XMM_CLOBBERS, "memory", "cc");
    });
    EXPECT_EQ(full, full_expected) << "the fast path where no AVX-512 state is in use, else the whole state";
    EXPECT_EQ(result, &marker);
    EXPECT_EQ(before & 0x4500, 0x4100) << std::hex << before;
    EXPECT_EQ(after, before) << std::hex << "status word " << after << ", was " << before;
  }
}

// The general-purpose registers an ordinary call may change (fn sets them all to -1).
TEST(ColdCall, KeepsGeneralPurposeRegisters) {
  std::array<std::uint64_t, 9> in{}, out{};
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 0x1111111111111111ULL * (i + 1);
  int marker = 10;
  void* result = nullptr;
  auto fn = &clobber_sse;
  asm volatile(
      "movq 0(%[in]), %%rbx\n\t movq 8(%[in]), %%rcx\n\t movq 16(%[in]), %%rdx\n\t"
      "movq 24(%[in]), %%r8\n\t movq 32(%[in]), %%r9\n\t movq 40(%[in]), %%r10\n\t"
      "movq 48(%[in]), %%r11\n\t" MATE_CALL_TRAMPOLINE
      "movq %%rbx, 0(%[out])\n\t movq %%rcx, 8(%[out])\n\t movq %%rdx, 16(%[out])\n\t"
      "movq %%r8, 24(%[out])\n\t movq %%r9, 32(%[out])\n\t movq %%r10, 40(%[out])\n\t"
      "movq %%r11, 48(%[out])\n\t movq %%rdi, 56(%[out])\n\t movq %%rsi, 64(%[out])\n\t"
      : "=&a"(result)
      : "D"(fn), "S"(&marker), [in] "r"(in.data()), [out] "r"(out.data())
      : "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", MATE_XMM_CLOBBERS, "memory", "cc");
  EXPECT_EQ(result, &marker);
  for (std::size_t i = 0; i < 7; ++i) EXPECT_EQ(out[i], in[i]) << "register " << i;
  EXPECT_EQ(out[7], reinterpret_cast<std::uint64_t>(fn)) << "rdi";
  EXPECT_EQ(out[8], reinterpret_cast<std::uint64_t>(&marker)) << "rsi";
}

}  // namespace
#endif
