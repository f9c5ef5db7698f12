// Authorizer: who may call what on which collection, from a policy file.
//
// The policy (service/access/authz_policy.proto, in protobuf text format)
// grants identities the collections they may call NextRange and ReturnRange on,
// and their HiLoAdmin access. A caller's identities come from its client
// certificate (SAN URIs, SAN DNS names, subject CN: what gRPC's
// AuthContext reports) and from a bearer token, which the token file
// (one "NAME TOKEN" a line) turns into "token:NAME". The token never
// appears in a message or a log, and the server keeps only its SHA-256.
//
// A call resolves its caller once (Resolve: at most one SHA-256 of a token
// of at most kMaxBearerTokenBytes, compared in constant time with every
// configured digest) and then checks each thing it asks for (Check), so a
// ReturnRanges of 1000 items costs one resolution, however many tokens the
// file holds:
//
//   absl::StatusOr<std::unique_ptr<Authorizer>> authz =
//       Authorizer::Load("/etc/hilo/policy.textproto", "/etc/hilo/tokens");
//   Principal who = (*authz)->Resolve(caller, "NextRange");
//   if (!who.status.ok()) return done(who.status);  // UNAUTHENTICATED
//   Decision d = Authorizer::Check(who, Method::kNextRange, "orders");
//   if (!d.status.ok()) return done(d.status);  // PERMISSION_DENIED
//
// Reload() reads both files again and swaps the policy in only if both
// parse; a bad file leaves the old policy in force, a policy that grants
// nothing is a bad file unless it says `deny_all: true`, and a token file
// deleted after Load is an empty one (every token revoked). Without an
// Authorizer a server trusts every admitted client (see docs/security.md).
//
// Thread-safe.
#ifndef HILO_SERVICE_ACCESS_AUTHORIZER_H_
#define HILO_SERVICE_ACCESS_AUTHORIZER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hilo/base/mutex.h"
#include "service/access/collection_limit.h"

namespace hilo {

// The calls a policy speaks of.
enum class Method {
  kNextRange,
  kReturnRange,
  kGetCollection,
  kListCollections,
  kSetFloor,
  kDeleteCollection,
};
inline constexpr Method kAllMethods[] = {
    Method::kNextRange,       Method::kReturnRange, Method::kGetCollection,
    Method::kListCollections, Method::kSetFloor,    Method::kDeleteCollection};

// "NextRange", "SetFloor", ...: the RPC's name.
absl::string_view MethodName(Method method);

// Who is calling, as the transport found it.
struct Caller {
  // What the client certificate vouches for, each with its kind:
  // "uri:...", "dns:...", "cn:...". Empty without one.
  std::vector<std::string> certificate_identities;
  // The token of an "authorization: Bearer <token>" header; a secret.
  std::string bearer_token;
  bool has_bearer_token = false;
  // How many authorization headers the call carried. More than one is
  // refused whatever they hold: a proxy that appends its own header
  // instead of replacing the client's must not let the client's through.
  int authorization_headers = 0;
  // The peer's address as gRPC names it ("ipv4:127.0.0.1:41234").
  std::string peer;
};

// "a caller with no identity"; a policy may grant it like any other.
inline constexpr char kAnonymous[] = "anonymous";

// The name a message gives the caller: its first certificate identity, else
// "anonymous", without consulting any token list.
std::string DisplayIdentity(const Caller& caller);

// A matcher for collection names: exact, or '*' as any run of bytes.
bool MatchesCollectionPattern(absl::string_view pattern,
                              absl::string_view name);

// Bearer tokens longer than this are refused unread (never hashed nor
// compared), and a token file may not hold one.
inline constexpr size_t kMaxBearerTokenBytes = 512;

// A parsed policy and token list (authorizer.cc).
struct ParsedAuthzPolicy;

// Who a caller is under the policy in force when it was resolved.
struct Principal {
  // OK, or UNAUTHENTICATED for a bearer token no line of the token file
  // holds (naming the caller and the call, never the token).
  absl::Status status;
  // The caller as messages and the audit log name it: its first
  // certificate identity, else its token's, else "anonymous".
  std::string identity;
  // Every identity the caller holds ("anonymous" if none).
  std::vector<std::string> identities;
  // The policy it was resolved under: every Check of this principal
  // answers from it, even if a reload swaps another in meanwhile.
  std::shared_ptr<const ParsedAuthzPolicy> policy;
};

// What Check decided.
struct Decision {
  // OK, PERMISSION_DENIED naming the identity, the method and the
  // collection, or UNAUTHENTICATED for a bearer token the list lacks.
  absl::Status status;
  // The caller as messages and the audit log name it.
  std::string identity;
  // The caller may administer collections (ADMIN_SET_FLOOR: SetFloor and
  // DeleteCollection), so its last_max is not held to the jump limit.
  bool may_administer = false;
  // For NextRange: whose creation budget a new collection is charged to
  // (the identity whose grants allowed `collection`, the largest budget if
  // several did) and that budget.
  CreationQuota creation_quota;
};

class Authorizer {
 public:
  using Policy = ParsedAuthzPolicy;

  // Reads and checks both files (`tokens_path` may be empty: no tokens).
  // INVALID_ARGUMENT with one line naming the file, the line and the
  // reason if either is unreadable or malformed.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Load(
      std::string policy_path, std::string tokens_path);

  // Reads both files again. If both parse, the new policy answers every
  // Resolve from now on and this returns OK; otherwise the old one stays
  // and this returns Load's error. A token file deleted after Load (ENOENT)
  // is read as an empty one: every token is revoked, and
  // tokens_file_missing() says so until it is back. Unchanged files are a cheap
  // no-op, so calling it every few seconds is how a changed file is noticed.
  absl::Status Reload();

  // Who `caller` is, for a call of the RPC named `rpc` (for the message):
  // its certificate identities and, for a bearer token, the token's. A
  // token longer than kMaxBearerTokenBytes is unknown without a look; any
  // other is hashed once and its digest compared with every configured
  // one in constant time.
  Principal Resolve(const Caller& caller, absl::string_view rpc) const;

  // May `who` call `method` on `collection` (ignored for
  // ListCollections)? An unauthenticated principal may not.
  static Decision Check(const Principal& who, Method method,
                        absl::string_view collection);

  // Resolve then Check, for a call that asks for one thing.
  Decision Check(const Caller& caller, Method method,
                 absl::string_view collection) const;

  // The token file was absent at the last Reload that took effect.
  bool tokens_file_missing() const;

  // For tests: calls of Resolve, and token digests compared, since Load.
  int64_t resolutions() const { return resolutions_.load(); }
  int64_t token_digest_comparisons() const {
    return token_digest_comparisons_.load();
  }

  // How many policies have been in force: 1 after Load, one more for
  // each Reload that found the files changed and took them.
  int64_t generation() const;

  const std::string& policy_path() const { return policy_path_; }

 private:
  Authorizer(std::string policy_path, std::string tokens_path);

  const std::string policy_path_;
  const std::string tokens_path_;
  mutable base::Mutex mu_;
  std::shared_ptr<const Policy> policy_ ABSL_GUARDED_BY(mu_);
  std::string policy_text_ ABSL_GUARDED_BY(mu_);
  // The token file's SHA-256 (its text holds secrets), and whether it was
  // absent.
  std::array<unsigned char, 32> tokens_digest_ ABSL_GUARDED_BY(mu_) = {};
  bool tokens_missing_ ABSL_GUARDED_BY(mu_) = false;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::atomic<int64_t> resolutions_{0};
  mutable std::atomic<int64_t> token_digest_comparisons_{0};
};

}  // namespace hilo

#endif  // HILO_SERVICE_ACCESS_AUTHORIZER_H_
