// A statically linked program: LD_PRELOAD cannot reach it, which `mate guard-run` must say.
#include <cstdio>

int main() {
  std::puts("static program ran");
  return 0;
}
