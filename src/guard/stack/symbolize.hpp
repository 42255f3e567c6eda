// Backtraces in reports as function, file and line, by the platform's symbolizer (addr2line from
// binutils) run as a child process, as AddressSanitizer runs llvm-symbolizer: backtrace_symbols
// knows only the dynamic symbol table, so a program's own functions (and every static or
// inlined one) would otherwise show as module+offset.
//
// Runs where reports run: in the fault handler and in a free that found a bad canary. It uses no
// malloc, no stdio and no locks of its own (pipe, vfork, execve, poll, read, waitpid, on fixed
// buffers); dladdr, as backtrace_symbols_fd does, is the one call outside the async-signal-safe
// list. A symbolizer that is missing, fails, or takes more than a few seconds leaves the frames it
// did not name to the caller's plain output. AddressSanitizer builds never symbolize this way
// (vfork's child would run instrumented code in the parent's memory).
#pragma once

namespace mate::guard {

// Writes one line per frame, "    #3 0x7f... in function at file.cpp:12 (module+0x1a2b)", with
// " (inlined by) ..." lines for frames the compiler inlined; a frame the debug information does
// not cover reads "in symbol+0x1f (module+0x1a2b)" when the symbol table has a function
// containing it (elf_symbols.hpp), else "(module+0x1a2b)" alone. frames[0] is the faulting
// instruction itself when `first_is_exact` (an access stack), else every frame is a return
// address (its call is the instruction before it). Returns false, having written nothing, when
// symbolization is off (MATE_GUARD_SYMBOLIZE=0) or no symbolizer could name anything: the caller
// then prints the frames its own way.
bool write_symbolized_frames(int fd, void* const* frames, int count, bool first_is_exact = false) noexcept;

}  // namespace mate::guard
