// Allocates like an ordinary program, then prints how much memory glibc's own allocator has
// taken from the system (mallinfo2 is glibc's, never interposed): under `mate guard-run` every
// allocation is the guard's and the guard's bookkeeping uses its own arena, so glibc's heap is
// never started.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main() {
  std::vector<std::string> words;
  for (int i = 0; i < 100; ++i) words.push_back(std::string(40 + i, 'x'));
  char* buffer = static_cast<char*>(std::calloc(1000, 3));
  std::strcpy(buffer, words.back().c_str());
  buffer = static_cast<char*>(std::realloc(buffer, 20000));
  std::free(buffer);
  struct mallinfo2 info = mallinfo2();
  std::printf("glibc heap %zu mmapped %zu\n", info.arena, info.hblkhd);
  return 0;
}
