// Server TLS: gRPC server credentials from PEM files.
//
//   TlsFiles files{.cert = "server.pem", .key = "server.key"};
//   absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
//       hilo::ServerCredentialsFromFiles(files);
//
// With `client_ca` set the server requires a client certificate signed by
// that CA (mTLS); without it, any client that trusts the server may call.
#ifndef HILO_SERVICE_ACCESS_TLS_H_
#define HILO_SERVICE_ACCESS_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace hilo {

struct TlsFiles {
  std::string cert;       // PEM certificate chain of the server
  std::string key;        // PEM private key of the server
  std::string client_ca;  // PEM CA bundle for client certificates; empty
                          // means clients are not asked for one
};

// Reads the files. INVALID_ARGUMENT if only one of cert and key is given (or
// client_ca without them); UNAVAILABLE naming the file that cannot be read.
// Returns null credentials (plaintext) when no file is given at all.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>>
ServerCredentialsFromFiles(const TlsFiles& files);

}  // namespace hilo

#endif  // HILO_SERVICE_ACCESS_TLS_H_
