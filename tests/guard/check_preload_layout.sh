#!/usr/bin/env bash
# The guard preload's code layout (src/guard/preload/preload_layout.ld) does what it says: the seldom-run
# code (device-driver loading, configuration messages, report symbolization) sits in .text.seldom_run, the allocation
# path in .text within the code segment's first 64 KiB fault-around window, no static initializer
# among the seldom-run code, the C++ runtime's tables out of the first segment, and the library
# needs no library but libc (the C++ runtime is linked in). A pattern in the script that stops matching
# (a renamed file, other object names) would otherwise change nothing visible but the guarded
# program's resident memory.
#
#   check_preload_layout.sh path/to/libmate_guard_preload.so [plain|sanitized]
#
# In a sanitizer build the instrumented allocation path is several times larger than 64 KiB:
# only the sections are checked there.
set -euo pipefail
lib=$1
build=${2:-plain}
section() {  # name -> "start end" (hex, no 0x)
  readelf -SW "$lib" | awk -v n="$1" '$0 ~ "] " n " " { for (i = 1; i <= NF; ++i) if ($i == n) { print $(i + 2), $(i + 4); exit } }'
}
read -r seldom_start seldom_size < <(section .text.seldom_run) || { echo "no .text.seldom_run section in $lib"; exit 1; }
read -r text_start text_size < <(section .text) || { echo "no .text section in $lib"; exit 1; }
inside() {  # symbol pattern, section start, size -> ok when the symbol lies in it
  local address
  # (No early exit in awk: nm's output outgrows the pipe, and under pipefail its SIGPIPE would fail.)
  address=$(nm -C "$lib" | awk -v p="$1" 'index($0, p) && ($2 == "t" || $2 == "T") && !seen++ { print $1 }')
  [ -n "$address" ] || { echo "symbol not found: $1"; return 1; }
  (( 16#$address >= 16#$2 && 16#$address < 16#$2 + 16#$3 )) || { echo "$1 at 0x$address is outside the section at 0x$2 (+0x$3)"; return 1; }
}
status=0
for seldom in "mate::device::open_driver_backend(" "mate::config::accepted_values[" "mate::config::unknown_variables()" \
              "mate::guard::write_symbolized_frames("; do
  inside "$seldom" "$seldom_start" "$seldom_size" || status=1
done
# The C++ runtime is linked in: what of it runs in every guarded program (static locals, new)
# belongs with the allocation path (a sanitized build takes new, and under ThreadSanitizer the
# static locals' guards, from the sanitizer runtime).
hot_symbols=("mate::guard::GuardAllocator::allocate(" "mate::guard::GuardAllocator::deallocate(" "mate::config::parse_scalar(")
[ "$build" = plain ] && hot_symbols+=("__cxa_guard_acquire" "operator new(unsigned long)")
for hot in "${hot_symbols[@]}"; do
  inside "$hot" "$text_start" "$text_size" || status=1
done
# Start-up code runs in every guarded program: a static initializer among the seldom-run code
# would page its window in.
while read -r address name; do
  if (( 16#$address >= 16#$seldom_start && 16#$address < 16#$seldom_start + 16#$seldom_size )); then
    echo "static initializer $name at 0x$address is in .text.seldom_run"; status=1
  fi
done < <(nm "$lib" | awk '$3 ~ /^_GLOBAL__sub_I/ { print $1, $3 }')
# The code segment starts on a 64 KiB fault-around window and the allocation path fits in it.
read -r code_start code_align < <(readelf -lW "$lib" | awk '$1 == "LOAD" && / R E / { print $3, $NF; exit }')
if [ "${code_align:-}" != 0x10000 ] || (( code_start % 0x10000 != 0 )); then
  echo "code segment at ${code_start:-?} aligned ${code_align:-?}: want a 64 KiB-aligned start (-z max-page-size=0x10000)"; status=1
elif [ "$build" = plain ] && (( 16#$text_start + 16#$text_size > code_start + 0x10000 )); then
  echo ".text (0x$text_start +0x$text_size) no longer fits the first 64 KiB of the code segment ($code_start)"; status=1
fi
# The guard starts in the library's last initializer (src/guard/preload/preload_start.cpp, linked last),
# after those of the C++ runtime linked in, which allocate: the entry's place depends on link order.
read -r init_off init_size < <(readelf -SW "$lib" | awk '$0 ~ "] .init_array " { for (i = 1; i <= NF; ++i) if ($i == ".init_array") { print $(i + 3), $(i + 4); exit } }')
last_entry=$(od -An -t x8 -j $((16#$init_off + 16#$init_size - 8)) -N 8 "$lib" | tr -d ' ')
if (( 16#$last_entry == 0 )); then  # the address is in a RELATIVE relocation's addend instead
  read -r init_address _ < <(section .init_array)
  slot=$(printf '%016x' $((16#$init_address + 16#$init_size - 8)))
  last_entry=$(readelf -rW "$lib" | awk -v s="$slot" '$1 == s && /RELATIVE/ && !seen++ { print $NF }')
fi
start_address=$(nm -C "$lib" | awk '/ mate_guard_preload_start\(\)$/ && !seen++ { print $1 }')
if [ -z "$start_address" ] || [ -z "$last_entry" ] || (( 16#$last_entry != 16#$start_address )); then
  echo "the last initializer is 0x${last_entry:-?}, not mate_guard_preload_start (0x${start_address:-?}): link preload_start.cpp's object last"
  status=1
fi
# It loads no library into the guarded program but libc (and the loader): libfmt, libstdc++,
# libm and libgcc_s each cost a C program hundreds of KiB of resident pages (a sanitized build
# also needs its sanitizer runtimes).
needed=$(readelf -dW "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^libc\.so\|^ld-linux\|^libdl\.so\|^libpthread\.so\|^libasan\.so\|^libubsan\.so\|^libtsan\.so' || true)
if [ -n "$needed" ]; then echo "$lib needs more than libc:" $needed; status=1; fi
# The C++ runtime's read-only data (number formatting tables) stays out of the first segment,
# which the loader reads all of.
read -r hot_rodata_start hot_rodata_size < <(section .rodata.hot) || { echo "no .rodata.hot section in $lib"; exit 1; }
while read -r address; do
  if (( 16#$address >= 16#$hot_rodata_start && 16#$address < 16#$hot_rodata_start + 16#$hot_rodata_size )); then
    echo "the C++ runtime's tables at 0x$address are in .rodata.hot"; status=1; break
  fi
done < <(nm -C "$lib" | awk '($2 == "r" || $2 == "R") && /ryu::/ { print $1 }')
[ "$status" = 0 ] && echo "preload layout ok: seldom-run code in .text.seldom_run (0x$seldom_size bytes), hot code in .text (0x$text_size bytes)"
exit "$status"
