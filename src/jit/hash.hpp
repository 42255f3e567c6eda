// Content hashes for module keys and input digests: XXH3-128 from Debian's libxxhash
// (header-only use, no run-time dependency).
//
// Why not SHA-256 from OpenSSL: OpenSSL 3 initialises its provider framework (reads
// openssl.cnf, builds name tables) on first digest, which measured as about a fifth of a whole
// warm-hit process (bench/README.md): too much against the 2 ms budget. The key guards against
// accidental collisions of build inputs, not against an attacker who can already write the
// cache directory, so a 128-bit non-cryptographic hash is enough (Triton-style content keys).
#pragma once

#include <string>
#include <string_view>

namespace mate::jit::detail {

class ContentHash {
 public:
  ContentHash();
  ~ContentHash();
  ContentHash(const ContentHash&) = delete;
  ContentHash& operator=(const ContentHash&) = delete;
  ContentHash& update(std::string_view bytes);
  // 32 lowercase hex characters.
  std::string hex() const;

 private:
  void* state_;  // XXH3_state_t*
};

std::string content_hash_hex(std::string_view bytes);

}  // namespace mate::jit::detail
