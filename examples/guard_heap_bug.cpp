// A heap bug for `mate guard-run` to catch (docs/guard-allocator.md):
//   mate guard-run --mode tail -- guard_heap_bug past    writes one element past the end
//   mate guard-run --mode head -- guard_heap_bug before  writes one element before the start
//   mate guard-run -- guard_heap_bug free_inside           frees a pointer into the buffer
//   mate guard-run -- guard_heap_bug realloc_inside        reallocs a pointer into the buffer
//   mate guard-run -- guard_heap_bug aligned_past          the same as past, on a buffer from
//                                                          aligned_alloc with a 64 KiB alignment
// Without the guard the program usually "works" and prints a wrong checksum or nothing at all.
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  const bool before = argc > 1 && std::strcmp(argv[1], "before") == 0;
  const bool free_inside = argc > 1 && std::strcmp(argv[1], "free_inside") == 0;
  const bool realloc_inside = argc > 1 && std::strcmp(argv[1], "realloc_inside") == 0;
  const bool aligned = argc > 1 && std::strcmp(argv[1], "aligned_past") == 0;
  // Aligned: 16384 ints = 64 KiB, a multiple of the alignment, so the end meets the guard.
  const int count = aligned ? 16384 : 1000;
  int* values = static_cast<int*>(aligned ? std::aligned_alloc(65536, count * sizeof(int))
                                          : std::malloc(count * sizeof(int)));
  if (values == nullptr) return 1;
  for (int i = 0; i < count; ++i) values[i] = i;
  // The bug: an off-by-one loop bound (or a negative index).
  if (free_inside) {
    int* volatile inside = values + 1;  // volatile: the compiler would refuse the obvious bug
    std::free(inside);                   // the bug: not the pointer malloc returned
    return 0;
  }
  if (realloc_inside) {
    int* volatile inside = values + 1;
    void* grown = std::realloc(inside, 2 * count * sizeof(int));  // the bug, as free_inside
    std::printf("realloc returned %s\n", grown != nullptr ? "a buffer" : "null");
    return 0;
  }
  volatile int index = before ? -1 : count;
  values[index] = 42;
  long sum = 0;
  for (int i = 0; i < count; ++i) sum += values[i];
  std::printf("sum %ld\n", sum);
  std::free(values);
  return 0;
}
