// Range tokens: the secret that proves a caller holds the range it returns.
//
// A store keeps only RangeTokenDigest(token), never the token: whoever can
// read the database (a copy of the SQLite file, a PostgreSQL role with
// SELECT, a backup) sees digests, and a digest sent as a token is refused
// like any other wrong token.
#ifndef HILO_SERVICE_STORE_RANGE_TOKEN_H_
#define HILO_SERVICE_STORE_RANGE_TOKEN_H_

#include <cstdint>

namespace hilo {

// 64 bits from the kernel's random source (getrandom), never 0. Not a
// counter, not seeded by time: a caller that sees many tokens learns
// nothing about the next. Each thread takes 32 tokens' worth of bytes per
// getrandom call and hands each out once (zeroing it); a child after fork()
// discards what it inherited. Thread-safe.
uint64_t NewRangeToken();

// What a store keeps of `token`: the first 8 bytes of SHA-256 over the
// token's 8 bytes in big-endian order, read as a big-endian integer, with
// the lowest bit set, so a digest is never 0 (0 stays 0: "no token").
// PostgreSQL computes the same from SQL
// (`(('x' || encode(substr(sha256(int8send(t)), 1, 8), 'hex'))::bit(64)
// ::bigint) | 1`) when it migrates tokens stored in clear.
//
// Finding a token with a given digest costs about 2^63 SHA-256 evaluations,
// as much as guessing the token itself; the digest adds no secret of its
// own (the token's 64 random bits are the secret). Thread-safe; aborts if
// libcrypto cannot compute it (out of memory), since a wrong digest could
// match another range's token.
uint64_t RangeTokenDigest(uint64_t token);

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_RANGE_TOKEN_H_
