// A library built as distributions ship theirs: no debug information, and (one of its two builds)
// no .symtab either, only the exported functions in .dynsym. Its writer is a static function
// placed right after an exported one, so the nearest symbol below the faulting instruction is
// `nodebug_exported_before`, which does not contain it: a report must not name it
// (tests/guard/test_guard_reports.cpp, report_child library).
#include <cstddef>

extern "C" __attribute__((visibility("default"), noinline)) int nodebug_exported_before(int x) { return x * 3 + 1; }

static __attribute__((noinline)) void nodebug_hidden_writer(char* p, std::size_t n) {
  p[n] = static_cast<char>(nodebug_exported_before(static_cast<int>(n)));
  asm volatile("" ::: "memory");
}

extern "C" __attribute__((visibility("default"), noinline)) void nodebug_entry(char* p, std::size_t n) {
  nodebug_hidden_writer(p, n);
  asm volatile("" ::: "memory");
}
