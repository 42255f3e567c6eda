// A kernel library's view of MATE after `cmake --install`: headers and typed getters.
#include <cstdio>

#include <mate/config.hpp>

int main() {
  std::printf("mk alignment %lld\n", static_cast<long long>(mate::config::deepgemm_mk_alignment()));
  return 0;
}
