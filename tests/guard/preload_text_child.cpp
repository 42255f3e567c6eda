// Allocates and frees a mix of sizes as an ordinary C program does, then prints how much of the
// guard preload's code is resident ("preload text KiB N", from /proc/self/smaps): the allocation
// path and the guard's start-up are laid out to fit one 64 KiB fault-around window
// (src/guard/preload_layout.ld), and a call from them into seldom-run code costs another window
// in every guarded process.
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main() {
  static const std::size_t sizes[] = {16, 100, 1000, 4000, 4096, 10000, 70000};
  void* live[64] = {};
  for (int i = 0; i < 2000; ++i) {
    const int slot = (i * 7) % 64;
    std::free(live[slot]);
    const std::size_t n = sizes[i % 7];
    char* p = static_cast<char*>(std::malloc(n));
    p[0] = 1;
    p[n - 1] = 2;
    live[slot] = p;
  }
  std::FILE* smaps = std::fopen("/proc/self/smaps", "r");
  if (smaps == nullptr) return 1;
  char line[512];
  bool in_text = false;
  long text_kib = -1;
  while (std::fgets(line, sizeof line, smaps) != nullptr) {
    char range[64], perms[8];
    if (std::sscanf(line, "%63s %7s", range, perms) == 2 && std::strchr(range, '-') != nullptr &&
        std::strlen(perms) == 4) {
      in_text = std::strstr(line, "libmate_guard_preload.so") != nullptr && perms[2] == 'x';
    } else if (in_text && std::strncmp(line, "Rss:", 4) == 0) {
      text_kib = std::atol(line + 4);
    }
  }
  std::fclose(smaps);
  for (void* p : live) std::free(p);
  std::printf("preload text KiB %ld\n", text_kib);
  return 0;
}
