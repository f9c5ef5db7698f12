#include "service/access/tls.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "hilo/base/file.h"

namespace hilo {
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>>
ServerCredentialsFromFiles(const TlsFiles& files) {
  if (files.cert.empty() && files.key.empty() && files.client_ca.empty()) {
    return std::shared_ptr<grpc::ServerCredentials>();
  }
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate and a key (--tls_cert and --tls_key)");
  }
  absl::StatusOr<std::string> cert =
      base::ReadPemFile(files.cert, "TLS certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = base::ReadPemFile(files.key, "TLS key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(
      files.client_ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!files.client_ca.empty()) {
    absl::StatusOr<std::string> ca =
        base::ReadPemFile(files.client_ca, "client CA");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

}  // namespace hilo
