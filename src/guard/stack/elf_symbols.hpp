// The function symbol that contains an address, read from an ELF file's symbol table: .symtab
// when the file has one, else the dynamic symbols (.dynsym), and only a symbol whose size covers
// the address. For frames in code without debug information: a symbolizer answers with the
// nearest symbol below the address, which in a stripped library is often an unrelated exported
// function (a static function of libpython named as the exported one before it).
//
// Async-signal-safe: raw system calls (openat, pread, close) into caller-given buffers; no
// allocation, no locks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mate::guard {

struct ContainingSymbol {
  bool found = false;
  std::uint64_t start = 0;  // link-time address of the symbol (its st_value)
  char name[256] = {};      // as in the file (mangled), cut to fit
};

// For each of `count` link-time addresses in the file at `path`, the symbol containing it.
// `buffer` (`bytes` long, a few KiB or more) holds the table as it is read. Returns false, with
// nothing found, when the file cannot be read as a 64-bit ELF file with a symbol table.
bool find_containing_symbols(const char* path, const std::uint64_t* addresses, int count, ContainingSymbol* out,
                             unsigned char* buffer, std::size_t bytes) noexcept;

}  // namespace mate::guard
