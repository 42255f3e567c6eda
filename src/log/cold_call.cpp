// The out-of-line logging path's entry points (see "the logging path, out of line" in
// mate/log/api.hpp), and on x86-64 the trampoline that calls them preserving every register.
#include <cstdint>

#include "log_internal.hpp"

namespace mate::log::detail {

void* stream_call(void* r) noexcept {
  auto& req = *static_cast<StreamRequest*>(r);
  set_stream(req.state, req.stream);
  return nullptr;
}

void* start_call_cold(void* state) noexcept {
  try {
    start_call(static_cast<CallState*>(state));
  } catch (...) {
    // start_call catches what describing the inputs throws; this is for anything else.
  }
  return nullptr;
}

void* end_call_cold(void* state) noexcept {
  end_call(static_cast<CallState*>(state));
  return nullptr;
}

}  // namespace mate::log::detail

#if defined(MATE_LOG_COLD_CALL_TRAMPOLINE)
// How many times the trampoline saved the whole state (tests check which way it took).
extern "C" __attribute__((visibility("hidden"))) std::uint64_t mate_log_cold_call_full_saves;
std::uint64_t mate_log_cold_call_full_saves = 0;

namespace mate::log::detail {
std::uint64_t cold_call_full_saves_for_testing() noexcept {
  return __atomic_load_n(&mate_log_cold_call_full_saves, __ATOMIC_RELAXED);
}
}  // namespace mate::log::detail

// void* mate_log_cold_call(ColdFn fn /* rdi */, void* arg /* rsi */): returns fn(arg) in rax and
// leaves every other register as it found it: the general-purpose ones an ordinary call may
// change, and the vector, x87 and MXCSR state.
//
// Saving the whole vector state (XSAVE/XRSTOR, ~0.15 µs per call on the development VM, up to
// five per logged call) is only needed when the caller may hold values beyond xmm0-15. The CPU
// says which state components are in use (XGETBV with ECX=1: XCR0 & XINUSE), so the common
// cases are cheap. When the upper halves of zmm0-15 are not in use (XINUSE bit 6: code that
// computes on zmm0-15 and has not yet run vzeroupper), and the x87 registers hold no value
// (FNSTENV, which does not wait for pending exceptions: every tag empty, no unmasked exception
// pending; MMX values are tagged):
//   * AVX upper halves not in use (as after the vzeroupper compilers put before calls): xmm0-15
//     are saved with moves, and after fn vzeroupper (where AVX is enabled) puts the upper halves
//     back in their initial state, exactly as they were;
//   * AVX upper halves in use: ymm0-15 with moves;
//   * in both, MXCSR by STMXCSR/LDMXCSR and the x87 environment (control, status with its flags
//     and condition codes, tags) by FNSTENV/FLDENV when x87 state is in use;
//   * opmasks or zmm16-31 in use (bits 5 and 7: on a CPU with AVX-512, glibc's EVEX string
//     functions use them, so they are in use at nearly every call there): k0-7 and zmm16-31
//     with moves (where the CPU has AVX512F and AVX512BW, for the 64-bit KMOVQ), put back after
//     fn by moves (an XSAVEC/XRSTOR pair of the whole state cost ~0.3 us per call on an AVX-512
//     VM: 40% of a level-1 call). Otherwise the AVX-512 components that fn left in use are put
//     back in their initial state by an XRSTOR of just those components from an empty header;
//     zmm0-15's upper halves (bit 6), if fn left them in use, always so.
// Anything else (zmm0-15's upper halves or x87 values at entry, opmasks or zmm16-31 where the
// CPU lacks AVX512BW, or a CPU without XINUSE): the whole
// state, with XSAVEC where the CPU has it (compacted, initial components skipped), else XSAVE
// (x87, SSE, AVX and AVX-512 components), else FXSAVE (no XSAVE). AMX tile state is neither
// saved nor touched (nothing on the logging path uses AMX). XRSTOR reads either XSAVE layout.
// What the CPU has is decided on the first call and kept in `mode`: bits 0-1 the full save
// (1 FXSAVE, 2 XSAVE, 3 XSAVEC), bit 2 XINUSE readable (CPUID.(0xD,1):EAX bit 2), bit 3 AVX
// state enabled (XCR0 bits 1 and 2), bit 4 AVX-512 state enabled (XCR0 bits 5-7), bit 5 that
// and AVX512F and AVX512BW (CPUID.(7,0):EBX bits 16 and 30): the opmask and zmm16-31 moves.
//
// Fast-path frame (1664 bytes, 64-byte aligned): [0, 512) the vector registers, 512 MXCSR,
// 516 mode, 520 whether the x87 environment was saved, [528, 556) that environment, 560 MXCSR
// as fn left it (LDMXCSR, ~7 ns here, only when fn changed it), 564 whether the opmasks and
// zmm16-31 were saved, 568 XINUSE at entry, [576, 1600) zmm16-31, [1600, 1664) k0-7.
//
// The caller entered with its stack pointer 128 bytes below its own (past its red zone, see
// cold_call); the unwind information says so, so that debuggers and crash reports walk through
// to the caller. Nothing is ever thrown through here (the callees are noexcept).
asm(R"(
  .text
  .globl mate_log_cold_call
  .type mate_log_cold_call, @function
  .p2align 4
mate_log_cold_call:
  .cfi_startproc
  .cfi_def_cfa %rsp, 136
  .cfi_offset %rip, -136
  pushq %rbp
  .cfi_def_cfa_offset 144
  .cfi_offset %rbp, -144
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  pushq %rbx
  .cfi_offset %rbx, -152
  pushq %rcx
  pushq %rdx
  pushq %rsi
  pushq %rdi
  pushq %r8
  pushq %r9
  pushq %r10
  pushq %r11
  andq $-64, %rsp
  movl .Lmate_log_cold_call_mode(%rip), %eax
  testl %eax, %eax
  jnz 1f
  movl $1, %eax
  cpuid
  andl $0x0c000000, %ecx
  movl $1, %eax
  cmpl $0x0c000000, %ecx
  jne 2f
  movl $0xd, %eax
  movl $1, %ecx
  cpuid
  movl %eax, %r10d
  andl $2, %eax
  shrl $1, %eax
  addl $2, %eax
  andl $4, %r10d
  orl %eax, %r10d
  xorl %ecx, %ecx
  xgetbv
  movl %eax, %r11d
  andl $6, %eax
  cmpl $6, %eax
  jne 14f
  orl $8, %r10d
14:
  andl $0xe0, %r11d
  cmpl $0xe0, %r11d
  jne 15f
  orl $16, %r10d
  movl $7, %eax
  xorl %ecx, %ecx
  cpuid
  andl $0x40010000, %ebx
  cmpl $0x40010000, %ebx
  jne 15f
  orl $32, %r10d
15:
  movl %r10d, %eax
2:
  movl %eax, .Lmate_log_cold_call_mode(%rip)
1:
  movl %eax, %r11d
  testl $4, %r11d
  jz 3f
  movl $1, %ecx
  xgetbv
  testl $0x40, %eax
  jnz 3f
  testl $0xa0, %eax
  jz 17f
  testl $32, %r11d
  jz 3f
17:
  movl %eax, %r10d
  subq $1664, %rsp
  movl %r11d, 516(%rsp)
  movl $0, 520(%rsp)
  testl $1, %r10d
  jz 7f
  fnstenv 528(%rsp)
  cmpw $0xffff, 536(%rsp)
  jne 11f
  testw $0x80, 532(%rsp)
  jnz 11f
  movl $1, 520(%rsp)
  jmp 7f
11:
  fldenv 528(%rsp)
  addq $1664, %rsp
  jmp 3f
7:
  movl %r10d, 568(%rsp)
  movl $0, 564(%rsp)
  testl $0xa0, %r10d
  jz 18f
  movl $1, 564(%rsp)
  .irp n, 16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
  vmovdqa64 %zmm\n, (576 + (\n - 16) * 64)(%rsp)
  .endr
  .irp n, 0,1,2,3,4,5,6,7
  kmovq %k\n, (1600 + \n * 8)(%rsp)
  .endr
18:
  testl $4, %r10d
  jnz 8f
  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  movdqa %xmm\n, \n*16(%rsp)
  .endr
  stmxcsr 512(%rsp)
  movq %rdi, %rax
  movq %rsi, %rdi
  call *%rax
  movq %rax, %rbx
  call .Lmate_log_cold_call_after
  testl $8, 516(%rsp)
  jz 9f
  vzeroupper
9:
  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  movdqa \n*16(%rsp), %xmm\n
  .endr
  movq %rbx, %rax
  jmp 4f
8:
  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  vmovdqa %ymm\n, \n*32(%rsp)
  .endr
  stmxcsr 512(%rsp)
  movq %rdi, %rax
  movq %rsi, %rdi
  call *%rax
  movq %rax, %rbx
  call .Lmate_log_cold_call_after
  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  vmovdqa \n*32(%rsp), %ymm\n
  .endr
  movq %rbx, %rax
  jmp 4f
3:
  addq $1, mate_log_cold_call_full_saves(%rip)
  andl $3, %r11d
  cmpl $2, %r11d
  jb 5f
  subq $2752, %rsp
  xorl %eax, %eax
  movq %rax, 512(%rsp)
  movq %rax, 520(%rsp)
  movq %rax, 528(%rsp)
  movq %rax, 536(%rsp)
  movq %rax, 544(%rsp)
  movq %rax, 552(%rsp)
  movq %rax, 560(%rsp)
  movq %rax, 568(%rsp)
  movl $0xff, %eax
  xorl %edx, %edx
  cmpl $3, %r11d
  je 6f
  xsave64 (%rsp)
  jmp 10f
6:
  xsavec64 (%rsp)
10:
  movq %rdi, %rax
  movq %rsi, %rdi
  call *%rax
  movq %rax, %rbx
  movl $0xff, %eax
  xorl %edx, %edx
  xrstor64 (%rsp)
  movq %rbx, %rax
  jmp 4f
5:
  subq $512, %rsp
  fxsave64 (%rsp)
  movq %rdi, %rax
  movq %rsi, %rdi
  call *%rax
  fxrstor64 (%rsp)
4:
  .cfi_remember_state
  leaq -72(%rbp), %rsp
  popq %r11
  popq %r10
  popq %r9
  popq %r8
  popq %rdi
  popq %rsi
  popq %rdx
  popq %rcx
  popq %rbx
  .cfi_restore %rbx
  popq %rbp
  .cfi_restore %rbp
  .cfi_def_cfa %rsp, 136
  ret
  .cfi_restore_state

  # After fn on a fast path (the frame is 8 bytes up, past this call's return address): the
  # opmasks and zmm16-31 back as they were when saved, else, as the upper halves of zmm0-15
  # always, the AVX-512 components fn left in use back to their initial state; MXCSR (when fn
  # changed it) and, when saved, the x87 environment back as they were. Uses eax, ecx, edx only.
.Lmate_log_cold_call_after:
  testl $16, 524(%rsp)
  jz 12f
  cmpl $0, 572(%rsp)
  je 19f
  .irp n, 16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
  vmovdqa64 (584 + (\n - 16) * 64)(%rsp), %zmm\n
  .endr
  .irp n, 0,1,2,3,4,5,6,7
  kmovq (1608 + \n * 8)(%rsp), %k\n
  .endr
  # On the xmm path the vzeroupper that follows puts zmm0-15's upper halves back as well.
  testl $4, 576(%rsp)
  jz 12f
19:
  # The components to put back in their initial state: those fn left in use, less the opmasks
  # and zmm16-31 when they were restored above. (XGETBV writes edx: the mask is applied after.)
  movl $1, %ecx
  xgetbv
  andl $0xe0, %eax
  cmpl $0, 572(%rsp)
  je 20f
  andl $0x40, %eax
20:
  testl %eax, %eax
  jz 12f
  xorl %edx, %edx
  xrstor64 .Lmate_log_cold_call_empty(%rip)
12:
  stmxcsr 568(%rsp)
  movl 568(%rsp), %eax
  cmpl 520(%rsp), %eax
  je 16f
  ldmxcsr 520(%rsp)
16:
  cmpl $0, 528(%rsp)
  je 13f
  fldenv 536(%rsp)
13:
  ret
  .cfi_endproc
  .size mate_log_cold_call, .-mate_log_cold_call

  .data
  .p2align 2
.Lmate_log_cold_call_mode:
  .long 0
  .bss
  .p2align 6
  # An XSAVE area whose header says no component is present: XRSTOR from it initializes the
  # components it is asked for.
.Lmate_log_cold_call_empty:
  .zero 576
  .text
)");
#endif
