// Writes one byte past the end of a 13-byte malloc block, then frees it: under
// `mate guard-run --align 1` the write faults at the access (the block ends at the guard), under
// the default alignment it lands in the padding up to 16 and is caught at free.
//
//   odd_size_child        prints "wrote" before the free, "freed" after it
#include <cstdio>
#include <cstdlib>

int main() {
  auto* p = static_cast<volatile char*>(std::malloc(13));
  if (p == nullptr) return 1;
  p[13] = 'A';
  std::printf("wrote\n");
  std::fflush(stdout);
  std::free(const_cast<char*>(p));
  std::printf("freed\n");
  return 0;
}
