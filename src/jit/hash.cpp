#include "jit/hash.hpp"

#include <new>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace mate::jit::detail {

namespace {

std::string to_hex(XXH128_hash_t h) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, h);
  static const char* hexdigits = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (unsigned char b : canonical.digest) {
    out += hexdigits[b >> 4];
    out += hexdigits[b & 15];
  }
  return out;
}

}  // namespace

ContentHash::ContentHash() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

ContentHash::~ContentHash() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

ContentHash& ContentHash::update(std::string_view bytes) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), bytes.data(), bytes.size());
  return *this;
}

std::string ContentHash::hex() const { return to_hex(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_))); }

std::string content_hash_hex(std::string_view bytes) { return to_hex(XXH3_128bits(bytes.data(), bytes.size())); }

}  // namespace mate::jit::detail
