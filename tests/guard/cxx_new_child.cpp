// A C++ program for the preload's operator new/delete (tests/guard/test_guard_run.cpp):
//   cxx_new_child past           new int[1000], one element written past the end
//   cxx_new_child after_delete   an int written through a pointer after delete
//   cxx_new_child failures       bad_alloc, the nothrow forms and the new-handler on a huge size
//   cxx_new_child aligned        new of a type aligned to 4096 bytes, then delete
//   cxx_new_child realloc_past   one byte past a buffer grown by realloc
//   cxx_new_child memalign_past  one byte past a buffer from posix_memalign
// (the last two check that an allocation's first frame is the program's for those entry points)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {

int g_handler_calls = 0;
void handler_once() {
  ++g_handler_calls;
  std::set_new_handler(nullptr);  // next time round: no handler, so bad_alloc
}

struct alignas(4096) Page {
  char bytes[4096];
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const char* mode = argv[1];
  if (std::strcmp(mode, "past") == 0) {
    int* values = new int[1000];
    volatile int index = 1000;
    static_cast<volatile int*>(values)[index] = 1;  // the bug (volatile: the store is kept)
    std::printf("not caught\n");
    delete[] values;
    return 0;
  }
  if (std::strcmp(mode, "after_delete") == 0) {
    int* value = new int(7);
    int* volatile stale = value;  // volatile: the compiler cannot tell it is `value`
    delete value;
    *static_cast<volatile int*>(stale) = 8;  // the bug
    std::printf("not caught\n");
    return 0;
  }
  if (std::strcmp(mode, "failures") == 0) {
    volatile std::size_t huge = std::size_t{1} << 62;
    try {
      char* p = new char[huge];
      std::printf("allocated %p\n", static_cast<void*>(p));
    } catch (const std::bad_alloc&) {
      std::printf("bad_alloc\n");
    }
    std::printf("nothrow %s\n", new (std::nothrow) char[huge] == nullptr ? "null" : "not null");
    std::set_new_handler(handler_once);
    try {
      char* p = new char[huge];
      std::printf("allocated %p\n", static_cast<void*>(p));
    } catch (const std::bad_alloc&) {
      std::printf("handler calls %d, then bad_alloc\n", g_handler_calls);
    }
    return 0;
  }
  if (std::strcmp(mode, "realloc_past") == 0 || std::strcmp(mode, "memalign_past") == 0) {
    void* p = nullptr;
    if (mode[0] == 'r') {
      p = std::realloc(std::malloc(10), 4000);
    } else if (posix_memalign(&p, 64, 4032) != 0) {
      return 1;
    }
    volatile int index = mode[0] == 'r' ? 4000 : 4032;
    static_cast<volatile char*>(p)[index] = 1;  // the bug
    std::free(p);
    return 0;
  }
  if (std::strcmp(mode, "aligned") == 0) {
    Page* page = new Page;
    std::memset(page->bytes, 1, sizeof page->bytes);
    std::printf("aligned %d\n", reinterpret_cast<std::uintptr_t>(page) % 4096 == 0 ? 1 : 0);
    delete page;
    return 0;
  }
  return 2;
}
