#include "service/store/range_token.h"

#include <openssl/sha.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdlib>

namespace hilo {

uint64_t NewRangeToken() {
  while (true) {
    uint64_t token = 0;
    // Eight bytes from the kernel's pool never come back short once it is
    // initialised; EINTR (a signal during the very first call after boot)
    // is the only retry.
    const ssize_t n = getrandom(&token, sizeof(token), 0);
    if (n == static_cast<ssize_t>(sizeof(token))) {
      if (token != 0) return token;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // A kernel without getrandom (before Linux 3.17) cannot run this
    // server safely: tokens must not be guessable.
    std::abort();
  }
}

uint64_t RangeTokenDigest(uint64_t token) {
  if (token == 0) return 0;
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<unsigned char>(token >> (56 - 8 * i));
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(bytes, sizeof(bytes), digest);
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | digest[i];
  return value | 1;
}

}  // namespace hilo
