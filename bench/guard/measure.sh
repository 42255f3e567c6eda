# What the guard's whole-program benches share (sourced by run_torch_bench.sh,
# run_program_bench.sh and run_guard_bench.sh): finding the other allocators' libraries, medians,
# and the wall time and peak RSS of a program by /usr/bin/time (%e %M).

# find_lib NAME: the path of the library NAME (libefence.so, libduma.so), or nothing.
find_lib() { for d in /usr/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do [ -e "$d/$1" ] && { echo "$d/$1"; return; }; done; }

# The median of the numbers on stdin, one a line; blank lines are no numbers (a here-string of
# lines that each end in a newline adds one, which sorted first).
median() { sort -n | awk 'NF { v[++n] = $1 } END { print v[int((n + 1) / 2)] }'; }

# ratio A B: A / B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# measure PREFIX...: runs PREFIX... "${command[@]}" `runs` times, writing into "$scratch" (the
# sourcing script sets runs, scratch and the array command), and sets seconds and kib to the
# medians of wall time and peak RSS. A failed run returns 1 with failure set to the last line of
# its output, '|' written as '/' (for the Markdown tables).
measure() {
  local r s k all_seconds="" all_kib=""
  for ((r = 0; r < runs; ++r)); do
    if ! /usr/bin/time -o "$scratch/time" -f "%e %M" "$@" "${command[@]}" >"$scratch/out" 2>&1; then
      failure=$(grep -v '^Command exited' "$scratch/out" | tail -1 | tr '|' '/') || true
      return 1
    fi
    read -r s k < <(tail -1 "$scratch/time")
    all_seconds+="$s"$'\n'; all_kib+="$k"$'\n'
  done
  seconds=$(median <<<"$all_seconds"); kib=$(median <<<"$all_kib")
}
