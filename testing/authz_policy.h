// What the authorization tests share: callers as the gRPC face builds them
// (a client certificate's identity, a bearer token) and one policy with its
// token file, for the Authorizer's own tests and for the Gatekeeper's.
//
//   WriteFile(policy, kPolicy);
//   WriteFile(tokens, kTokens);
//   auto authz = Authorizer::Load(policy, tokens);
//   authz->Check(Cert("cn:ops"), Method::kSetFloor, "orders");
//
// The policy grants:
//   uri:spiffe://test/orders   "orders" and "orders/*"
//   dns:reader.test            read-only administration
//   cn:ops, token:ops-batch    every collection and SetFloor
//   token:billing              "*-ids"
// and the token file names the tokens ops-batch and billing.
#ifndef HILO_TESTING_AUTHZ_POLICY_H_
#define HILO_TESTING_AUTHZ_POLICY_H_

#include <string>
#include <utility>

#include "service/access/authorizer.h"

namespace hilo::testing_util {

// A caller whose client certificate vouches for `identity` ("cn:ops").
inline Caller Cert(std::string identity) {
  Caller caller;
  caller.certificate_identities = {std::move(identity)};
  caller.peer = "ipv4:127.0.0.1:5555";
  return caller;
}

// A caller that sent "authorization: Bearer <token>".
inline Caller Bearer(std::string token) {
  Caller caller;
  caller.has_bearer_token = true;
  caller.bearer_token = std::move(token);
  caller.peer = "ipv4:127.0.0.1:6666";
  return caller;
}

inline constexpr char kPolicy[] = R"pb(
  grant {
    identity: "uri:spiffe://test/orders"
    collections: "orders"
    collections: "orders/*"
  }
  grant { identity: "dns:reader.test" admin: ADMIN_READ_ONLY }
  grant {
    identity: "cn:ops"
    identity: "token:ops-batch"
    collections: "*"
    admin: ADMIN_SET_FLOOR
  }
  grant { identity: "token:billing" collections: "*-ids" }
)pb";

inline constexpr char kTokens[] =
    "# name token\n"
    "ops-batch  0123456789abcdef0123\n"
    "billing\tfedcba9876543210fedc\n";

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_AUTHZ_POLICY_H_
