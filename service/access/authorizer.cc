#include "service/access/authorizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "openssl/crypto.h"
#include "openssl/sha.h"
#include "service/access/authz_policy.pb.h"

namespace hilo {

using TokenDigest = std::array<unsigned char, SHA256_DIGEST_LENGTH>;

// A parsed policy and token list.
struct ParsedAuthzPolicy {
  // What one identity may do, the union of the grants naming it.
  struct Rights {
    std::vector<std::string> collections;
    hilo::internal::AdminAccess admin = hilo::internal::ADMIN_NONE;
    // New collections a minute (the largest a grant naming it sets).
    int64_t creations_per_minute = 0;
  };
  absl::flat_hash_map<std::string, Rights> rights;
  // A token's SHA-256 and the identity ("token:NAME") it stands for.
  std::vector<std::pair<TokenDigest, std::string>> tokens;
};

namespace {

// Keeps protobuf's first parse error, with its line (1-based).
class FirstError final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!error_.empty()) return;
    error_ =
        absl::StrFormat("line %d column %d: %s", line + 1, column + 1, message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

// The file's bytes; INVALID_ARGUMENT naming it if it cannot be read, and
// NOT_FOUND if it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    const std::string message = absl::StrFormat(
        "%s %s cannot be read: %s", what, path, std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message)
                           : absl::InvalidArgumentError(message);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status Malformed(absl::string_view what, const std::string& path,
                       absl::string_view where, absl::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s %s %s: %s", what, path, where, reason));
}

bool ValidIdentity(absl::string_view identity) {
  if (identity == kAnonymous) return true;
  for (absl::string_view kind : {"uri:", "dns:", "cn:", "token:"}) {
    if (absl::StartsWith(identity, kind) && identity.size() > kind.size()) {
      return true;
    }
  }
  return false;
}

// Parses the policy text into `policy`.
absl::Status ParsePolicy(const std::string& path, const std::string& text,
                         Authorizer::Policy* policy);

TokenDigest Sha256(absl::string_view bytes) {
  TokenDigest digest;
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         digest.data());
  return digest;
}

}  // namespace

absl::string_view MethodName(Method method) {
  switch (method) {
    case Method::kNextRange:
      return "NextRange";
    case Method::kReturnRange:
      return "ReturnRange";
    case Method::kGetCollection:
      return "GetCollection";
    case Method::kListCollections:
      return "ListCollections";
    case Method::kSetFloor:
      return "SetFloor";
    case Method::kDeleteCollection:
      return "DeleteCollection";
  }
  return "unknown";
}

std::string DisplayIdentity(const Caller& caller) {
  return caller.certificate_identities.empty()
             ? std::string(kAnonymous)
             : caller.certificate_identities.front();
}

bool MatchesCollectionPattern(absl::string_view pattern,
                              absl::string_view name) {
  // Greedy match with one backtrack point (the last '*'): linear in
  // practice, never exponential.
  size_t p = 0, n = 0;
  size_t star = absl::string_view::npos, star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_n = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      n = ++star_n;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {

absl::Status ParsePolicy(const std::string& path, const std::string& text,
                         Authorizer::Policy* policy) {
  constexpr absl::string_view kWhat = "authz policy";
  hilo::internal::AuthzPolicy proto;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &proto)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s %s", kWhat, path, errors.error()));
  }
  // An empty file parses, and would refuse every caller: a truncated write
  // must not lock every client out, so refusing everyone is said outright.
  if (proto.grant_size() == 0 && !proto.deny_all()) {
    return Malformed(kWhat, path, "grants nothing",
                     "an empty or truncated file would refuse every caller; "
                     "to refuse every caller on purpose, write "
                     "\"deny_all: true\"");
  }
  if (proto.grant_size() > 0 && proto.deny_all()) {
    return Malformed(
        kWhat, path, "says deny_all: true",
        absl::StrFormat("yet has %d grants; remove one or the other",
                        proto.grant_size()));
  }
  for (int i = 0; i < proto.grant_size(); ++i) {
    const hilo::internal::Grant& grant = proto.grant(i);
    const std::string where = absl::StrFormat("grant %d", i + 1);
    if (grant.identity().empty()) {
      return Malformed(kWhat, path, where, "it names no identity");
    }
    for (const std::string& pattern : grant.collections()) {
      if (pattern.empty()) {
        return Malformed(kWhat, path, where,
                         "an empty collections entry matches nothing; use "
                         "\"*\" for every collection");
      }
    }
    for (const std::string& identity : grant.identity()) {
      if (!ValidIdentity(identity)) {
        return Malformed(
            kWhat, path, where,
            absl::StrFormat("identity \"%s\" needs a kind: uri:, dns:, cn:, "
                            "token: or the word anonymous",
                            absl::CHexEscape(identity)));
      }
      Authorizer::Policy::Rights& rights = policy->rights[identity];
      rights.collections.insert(rights.collections.end(),
                                grant.collections().begin(),
                                grant.collections().end());
      rights.admin = std::max(rights.admin, grant.admin());
      rights.creations_per_minute =
          std::max<int64_t>(rights.creations_per_minute,
                            grant.collection_creations_per_minute() > 0
                                ? grant.collection_creations_per_minute()
                                : kDefaultCreationsPerIdentityPerMinute);
    }
  }
  return absl::OkStatus();
}

// Parses "NAME TOKEN" lines ('#' starts a comment line) into `policy`.
absl::Status ParseTokens(const std::string& path, const std::string& text,
                         Authorizer::Policy* policy) {
  constexpr absl::string_view kWhat = "authz token file";
  int line_number = 0;
  absl::flat_hash_map<std::string, int> names;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = absl::StrFormat("line %d", line_number);
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    // The reasons never quote the line: it holds a secret.
    if (fields.size() != 2) {
      return Malformed(kWhat, path, where,
                       absl::StrFormat("it has %d fields; each line is NAME "
                                       "TOKEN",
                                       fields.size()));
    }
    if (fields[1].size() < 16) {
      return Malformed(kWhat, path, where,
                       "the token is shorter than 16 bytes; use a random one "
                       "(openssl rand -hex 32)");
    }
    if (fields[1].size() > kMaxBearerTokenBytes) {
      return Malformed(kWhat, path, where,
                       absl::StrFormat("the token is %d bytes; the limit is %d",
                                       fields[1].size(), kMaxBearerTokenBytes));
    }
    auto [it, inserted] = names.emplace(std::string(fields[0]), line_number);
    if (!inserted) {
      return Malformed(kWhat, path, where,
                       absl::StrFormat("name %s is already on line %d",
                                       fields[0], it->second));
    }
    const TokenDigest digest = Sha256(fields[1]);
    for (const auto& [other, identity] : policy->tokens) {
      if (other == digest) {
        return Malformed(kWhat, path, where,
                         absl::StrFormat("its token is also %s's", identity));
      }
    }
    policy->tokens.emplace_back(digest, absl::StrCat("token:", fields[0]));
  }
  return absl::OkStatus();
}

}  // namespace

Authorizer::Authorizer(std::string policy_path, std::string tokens_path)
    : policy_path_(std::move(policy_path)),
      tokens_path_(std::move(tokens_path)) {}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Load(
    std::string policy_path, std::string tokens_path) {
  std::unique_ptr<Authorizer> authorizer(
      new Authorizer(std::move(policy_path), std::move(tokens_path)));
  if (absl::Status s = authorizer->Reload(); !s.ok()) return s;
  return authorizer;
}

absl::Status Authorizer::Reload() {
  absl::StatusOr<std::string> policy_text =
      ReadFile(policy_path_, "authz policy");
  if (!policy_text.ok()) {
    return absl::InvalidArgumentError(policy_text.status().message());
  }
  std::string tokens_text;
  bool tokens_missing = false;
  if (!tokens_path_.empty()) {
    absl::StatusOr<std::string> read =
        ReadFile(tokens_path_, "authz token file");
    bool loaded;
    {
      base::MutexLock lock(&mu_);
      loaded = policy_ != nullptr;
    }
    // Removed after start: no tokens, so that a token revoked by deleting
    // the file cannot stay valid. At start it is a mistake in the flags.
    if (absl::IsNotFound(read.status()) && loaded) {
      tokens_missing = true;
    } else if (!read.ok()) {
      return absl::InvalidArgumentError(read.status().message());
    } else {
      tokens_text = *std::move(read);
    }
  }
  const TokenDigest tokens_digest = Sha256(tokens_text);
  {
    base::MutexLock lock(&mu_);
    if (policy_ != nullptr && *policy_text == policy_text_ &&
        tokens_digest == tokens_digest_ && tokens_missing == tokens_missing_) {
      return absl::OkStatus();
    }
  }
  auto policy = std::make_shared<Policy>();
  if (absl::Status s = ParsePolicy(policy_path_, *policy_text, policy.get());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseTokens(tokens_path_, tokens_text, policy.get());
      !s.ok()) {
    return s;
  }
  base::MutexLock lock(&mu_);
  policy_ = std::move(policy);
  policy_text_ = *std::move(policy_text);
  tokens_digest_ = tokens_digest;
  tokens_missing_ = tokens_missing;
  ++generation_;
  return absl::OkStatus();
}

bool Authorizer::tokens_file_missing() const {
  base::MutexLock lock(&mu_);
  return tokens_missing_;
}

int64_t Authorizer::generation() const {
  base::MutexLock lock(&mu_);
  return generation_;
}

Principal Authorizer::Resolve(const Caller& caller,
                              absl::string_view rpc) const {
  resolutions_.fetch_add(1, std::memory_order_relaxed);
  Principal who;
  {
    base::MutexLock lock(&mu_);
    who.policy = policy_;
  }
  who.identities = caller.certificate_identities;
  if (caller.authorization_headers > 1) {
    // Which one a proxy meant is not ours to guess: none is read.
    who.identity = DisplayIdentity(caller);
    who.status = absl::UnauthenticatedError(absl::StrFormat(
        "%s sent %d authorization headers; a call may carry one at most "
        "(calling %s)",
        who.identity, caller.authorization_headers, rpc));
    return who;
  }
  if (caller.has_bearer_token) {
    // A token too long to be one is unknown unread. Any other is hashed
    // once, and every digest is compared in full, so the time says nothing
    // about which entry (if any) matched.
    const std::string* found = nullptr;
    if (caller.bearer_token.size() <= kMaxBearerTokenBytes) {
      const TokenDigest digest = Sha256(caller.bearer_token);
      for (const auto& [configured, identity] : who.policy->tokens) {
        if (CRYPTO_memcmp(configured.data(), digest.data(), digest.size()) ==
            0) {
          found = &identity;
        }
      }
      token_digest_comparisons_.fetch_add(
          static_cast<int64_t>(who.policy->tokens.size()),
          std::memory_order_relaxed);
    }
    if (found == nullptr) {
      who.identity = DisplayIdentity(caller);
      who.status = absl::UnauthenticatedError(absl::StrFormat(
          "%s sent a bearer token this server does not know (calling %s)",
          who.identity, rpc));
      return who;
    }
    who.identities.push_back(*found);
  }
  if (who.identities.empty()) who.identities.push_back(kAnonymous);
  who.identity = who.identities.front();
  return who;
}

Decision Authorizer::Check(const Caller& caller, Method method,
                           absl::string_view collection) const {
  return Check(Resolve(caller, MethodName(method)), method, collection);
}

Decision Authorizer::Check(const Principal& who, Method method,
                           absl::string_view collection) {
  Decision decision;
  decision.identity = who.identity;
  if (!who.status.ok()) {
    decision.status = who.status;
    return decision;
  }
  const Policy* policy = who.policy.get();
  const std::vector<std::string>& identities = who.identities;
  bool collection_allowed = false;
  hilo::internal::AdminAccess admin = hilo::internal::ADMIN_NONE;
  for (const std::string& identity : identities) {
    auto it = policy->rights.find(identity);
    if (it == policy->rights.end()) continue;
    admin = std::max(admin, it->second.admin);
    for (const std::string& pattern : it->second.collections) {
      if (MatchesCollectionPattern(pattern, collection)) {
        collection_allowed = true;
        if (it->second.creations_per_minute >
            decision.creation_quota.per_minute) {
          decision.creation_quota = {identity, it->second.creations_per_minute};
        }
        break;
      }
    }
  }
  decision.may_administer = admin == hilo::internal::ADMIN_SET_FLOOR;
  bool allowed = false;
  switch (method) {
    case Method::kNextRange:
    case Method::kReturnRange:
      allowed = collection_allowed;
      break;
    case Method::kGetCollection:
    case Method::kListCollections:
      allowed = admin >= hilo::internal::ADMIN_READ_ONLY;
      break;
    case Method::kSetFloor:
    case Method::kDeleteCollection:
      allowed = decision.may_administer;
      break;
  }
  if (!allowed) {
    decision.status = absl::PermissionDeniedError(
        method == Method::kListCollections
            ? absl::StrFormat("%s may not call ListCollections",
                              decision.identity)
            : absl::StrFormat("%s may not call %s on collection \"%s\"",
                              decision.identity, MethodName(method),
                              collection));
  }
  return decision;
}

}  // namespace hilo
