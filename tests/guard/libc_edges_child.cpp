/* The C library's allocation functions at their edges, printed as results (never addresses), so
 * a test can require the same output with and without `mate guard-run`:
 *
 *   libc_edges_child             the edge cases
 *   libc_edges_child usable_inside   malloc_usable_size(p + 1) of a live buffer (a bug)
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void show(const char* what, void* p, size_t alignment) {
  printf("%s: %s", what, p == NULL ? "null" : "ok");
  if (p == NULL) printf(" errno %s", errno == ENOMEM ? "ENOMEM" : errno == EINVAL ? "EINVAL" : "other");
  if (p != NULL && alignment != 0) printf(" aligned to %zu: %s", alignment, (uintptr_t)p % alignment == 0 ? "yes" : "no");
  printf("\n");
  free(p);
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "usable_inside") == 0) {
    char* p = static_cast<char*>(malloc(100));
    printf("usable %zu\n", malloc_usable_size(p + 1));
    free(p);
    return 0;
  }
  // volatile: the compiler would refuse (or fold) the calls with constants it knows are bad.
  volatile size_t size_max = SIZE_MAX, three = 3, zero = 0;
  errno = 0;
  show("memalign(3, 10)", memalign(three, 10), 4);
  show("memalign(0, 10)", memalign(zero, 10), 0);
  show("memalign(48, 10)", memalign(48, 10), 64);
  errno = 0;
  show("memalign(SIZE_MAX, 10)", memalign(size_max, 10), 0);
  errno = 0;
  show("aligned_alloc(3, 10)", aligned_alloc(three, 10), 4);
  errno = 0;
  show("pvalloc(SIZE_MAX - 10)", pvalloc(size_max - 10), 0);
  show("pvalloc(10)", pvalloc(10), 4096);
  errno = 0;
  show("calloc(SIZE_MAX / 2, 3)", calloc(size_max / 2, three), 0);
  void* q = NULL;
  printf("posix_memalign(3): %s\n", posix_memalign(&q, three, 10) == EINVAL ? "EINVAL" : "other");
  printf("posix_memalign(0): %s\n", posix_memalign(&q, zero, 10) == EINVAL ? "EINVAL" : "other");
  return 0;
}
