// The thread's floating-point controls, saved and put back: the statistics run with the default
// mode whatever the caller's (ExactFloatMode), and a guarded read puts the controls back after
// a fault (host_read_guard.hpp: a signal handler starts with the initial FPU state, and
// siglongjmp does not bring the interrupted one back).
#pragma once

#if defined(__x86_64__)
#include <xmmintrin.h>  // _mm_getcsr, _mm_setcsr
#endif

namespace mate::tensor::detail {

// x86-64: MXCSR (SSE/AVX controls and their sticky exception flags) and the x87 control word;
// aarch64 (GCC's builtins, GCC 5 on): FPCR and FPSR (the flags). Elsewhere nothing is saved.
struct FloatControls {
#if defined(__x86_64__)
  unsigned mxcsr;
  unsigned short x87;
  // FTZ (bit 15), rounding (13-14), DAZ (6): what changes results; exceptions stay masked.
  static constexpr unsigned kModeBits = 0xe040;
  static FloatControls current() noexcept {
    FloatControls c;
    c.mxcsr = _mm_getcsr();
    asm volatile("fnstcw %0" : "=m"(c.x87));
    return c;
  }
  unsigned mode_bits() const noexcept { return mxcsr & kModeBits; }
  FloatControls with_default_mode() const noexcept { return {mxcsr & ~kModeBits, x87}; }
  void restore() const noexcept {
    _mm_setcsr(mxcsr);
    asm volatile("fldcw %0" : : "m"(x87));
  }
  // The vector unit's part only (what the statistics change).
  void restore_vector_mode() const noexcept { _mm_setcsr(mxcsr); }
  // The same, flags included, when anything there changed (reading MXCSR is cheap, writing it
  // ~7 ns on the development VMs).
  void restore_vector_state_if_changed() const noexcept {
    if (_mm_getcsr() != mxcsr) _mm_setcsr(mxcsr);
  }
#elif defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__)
  unsigned fpcr;
  unsigned fpsr;
  static constexpr unsigned kModeBits = 0x01c00000;  // FPCR.FZ (bit 24), RMode (22-23)
  static FloatControls current() noexcept {
    return {static_cast<unsigned>(__builtin_aarch64_get_fpcr()), static_cast<unsigned>(__builtin_aarch64_get_fpsr())};
  }
  unsigned mode_bits() const noexcept { return fpcr & kModeBits; }
  FloatControls with_default_mode() const noexcept { return {fpcr & ~kModeBits, fpsr}; }
  void restore() const noexcept { __builtin_aarch64_set_fpcr(fpcr); }
  void restore_vector_mode() const noexcept { restore(); }
  void restore_vector_state_if_changed() const noexcept {
    if (static_cast<unsigned>(__builtin_aarch64_get_fpcr()) != fpcr) __builtin_aarch64_set_fpcr(fpcr);
    if (static_cast<unsigned>(__builtin_aarch64_get_fpsr()) != fpsr) __builtin_aarch64_set_fpsr(fpsr);
  }
#else
  static FloatControls current() noexcept { return {}; }
  unsigned mode_bits() const noexcept { return 0; }
  FloatControls with_default_mode() const noexcept { return {}; }
  void restore() const noexcept {}
  void restore_vector_mode() const noexcept {}
  void restore_vector_state_if_changed() const noexcept {}
#endif
};

// The statistics are exact (and the same) whatever floating-point mode the caller runs in. A
// thread can have subnormals flushed to zero (x86's MXCSR FTZ and DAZ bits, set by -ffast-math's
// startup code or torch.set_flush_denormal(True); aarch64's FPCR.FZ): the kernels would then
// count e4m3 values below 2^-6, f16 below 2^-14 and f32 denormals as zero, the conversions'
// multiplies flushing them. It can also round other than to nearest (fesetround), which would
// change the sums' last bits. Both are set to the default for the computation and restored
// after; when they are the default (the common case) this costs reading the control registers.
// The exception flags the computation raises (inexact sums, NaN operands) do not reach the
// caller either: its flags are put back as they were. (The rest of a logged call's own work is
// covered on x86-64 by MATE_API's trampoline, which puts MXCSR back after each logging step.)
class ExactFloatMode {
 public:
  ExactFloatMode() noexcept : caller_(FloatControls::current()) {
    if (caller_.mode_bits() != 0) caller_.with_default_mode().restore_vector_mode();
  }
  ~ExactFloatMode() { caller_.restore_vector_state_if_changed(); }
  ExactFloatMode(const ExactFloatMode&) = delete;
  ExactFloatMode& operator=(const ExactFloatMode&) = delete;

  // The controls in effect inside this scope (for a guarded read to put back after a fault).
  FloatControls in_effect() const noexcept { return caller_.with_default_mode(); }

 private:
  FloatControls caller_;
};

}  // namespace mate::tensor::detail
