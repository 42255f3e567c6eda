// The out-of-line logging path's entry points (see "the logging path, out of line" in
// mate/log/api.hpp), and on x86-64 the trampoline that calls them preserving every register.
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
// void* mate_log_cold_call(ColdFn fn /* rdi */, void* arg /* rsi */): returns fn(arg) in rax and
// leaves every other register as it found it: the general-purpose ones an ordinary call may
// change, and the vector, x87 and MXCSR state, saved with XSAVEC where the CPU has it (compacted,
// and skipping components in their initial state: the upper halves of the YMM registers after a
// vzeroupper, AVX-512 in a program that does not use it — several times cheaper than XSAVE,
// which the logging path pays four times per call), else XSAVE (x87, SSE, AVX and AVX-512
// components: 2688 bytes in the standard layout), else FXSAVE on a CPU or OS without XSAVE.
// XRSTOR reads either layout. Which one is decided on the first call (CPUID.1:ECX: XSAVE and
// OSXSAVE; CPUID.(0xD,1):EAX bit 1: XSAVEC) and kept in `mode` (1 FXSAVE, 2 XSAVE, 3 XSAVEC).
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
  andl $2, %eax
  shrl $1, %eax
  addl $2, %eax
2:
  movl %eax, .Lmate_log_cold_call_mode(%rip)
1:
  movl %eax, %r11d
  cmpl $2, %r11d
  jb 3f
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
  je 5f
  xsave64 (%rsp)
  jmp 6f
5:
  xsavec64 (%rsp)
6:
  movq %rdi, %rax
  movq %rsi, %rdi
  call *%rax
  movq %rax, %rbx
  movl $0xff, %eax
  xorl %edx, %edx
  xrstor64 (%rsp)
  movq %rbx, %rax
  jmp 4f
3:
  subq $512, %rsp
  fxsave64 (%rsp)
  movq %rdi, %rax
  movq %rsi, %rdi
  call *%rax
  fxrstor64 (%rsp)
4:
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
  .cfi_endproc
  .size mate_log_cold_call, .-mate_log_cold_call

  .data
  .p2align 2
.Lmate_log_cold_call_mode:
  .long 0
  .text
)");
#endif
