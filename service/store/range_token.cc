#include "service/store/range_token.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace hilo {
namespace {

// Tokens one getrandom call fills a thread's buffer with: 256 bytes cost
// about as much CPU as 8 (one system call), so the call is paid once per 32
// tokens instead of once per NextRange.
constexpr size_t kTokensPerFill = 32;

// Bumped in a child after fork(): its threads' buffers were copied from the
// parent, whose next tokens they hold, so the child must not use them.
std::atomic<uint64_t> fork_generation{1};

void OnForkInChild() {
  fork_generation.fetch_add(1, std::memory_order_relaxed);
}

struct TokenBuffer {
  uint64_t tokens[kTokensPerFill];
  size_t next = kTokensPerFill;  // empty
  uint64_t generation = 0;       // none yet
};

// Fills `out` from the kernel's random source; aborts if it cannot (see
// NewRangeToken).
void FillFromKernel(void* out, size_t size) {
  auto* bytes = static_cast<unsigned char*>(out);
  while (size > 0) {
    // Up to 256 bytes never come back short once the pool is initialised;
    // EINTR (a signal during the very first call after boot) is the only
    // retry.
    const ssize_t n = getrandom(bytes, size, 0);
    if (n > 0) {
      bytes += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // A kernel without getrandom (before Linux 3.17) cannot run this
    // server safely: tokens must not be guessable.
    std::abort();
  }
}

struct DigestContextFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

// SHA-256 fetched once: OpenSSL 3's one-shot SHA256() looks the algorithm
// up in its provider tables on every call, about 7,700 instructions of the
// 8,000 a digest cost there (callgrind, 2026-11-28).
const EVP_MD* Sha256() {
  static const EVP_MD* const md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (fetched == nullptr) std::abort();  // libcrypto without SHA-256
    return fetched;
  }();
  return md;
}

}  // namespace

uint64_t NewRangeToken() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, OnForkInChild);
    return true;
  }();
  (void)registered;
  thread_local TokenBuffer buffer;
  const uint64_t generation = fork_generation.load(std::memory_order_relaxed);
  while (true) {
    if (buffer.next == kTokensPerFill || buffer.generation != generation) {
      FillFromKernel(buffer.tokens, sizeof(buffer.tokens));
      buffer.next = 0;
      buffer.generation = generation;
    }
    const uint64_t token = buffer.tokens[buffer.next];
    // Handed out once: nothing left in memory says what was given.
    buffer.tokens[buffer.next++] = 0;
    if (token != 0) return token;
  }
}

uint64_t RangeTokenDigest(uint64_t token) {
  if (token == 0) return 0;
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<unsigned char>(token >> (56 - 8 * i));
  }
  // One context per thread, reset by each digest.
  thread_local std::unique_ptr<EVP_MD_CTX, DigestContextFree> ctx(
      EVP_MD_CTX_new());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (ctx == nullptr || EVP_DigestInit_ex2(ctx.get(), Sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes, sizeof(bytes)) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &length) != 1 || length < 8) {
    // Out of memory inside libcrypto: a wrong digest would refuse the
    // holder's return or, worse, match another token's.
    std::abort();
  }
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | digest[i];
  return value | 1;
}

}  // namespace hilo
