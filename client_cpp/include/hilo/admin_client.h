// hilo::AdminClient: operator access to one hilo node.
//
// Reads a collection's stored state, lists collections a page at a time,
// raises a collection's floor (never lowers it), and asks the node's standard
// gRPC health service whether it is serving. The `hilo` command-line tool is
// built on it.
//
//   absl::StatusOr<std::unique_ptr<hilo::AdminClient>> admin =
//       hilo::AdminClient::Create("127.0.0.1:50051");
//   absl::StatusOr<hilo::CollectionInfo> orders =
//       (*admin)->GetCollection("orders");
//
// Thread-safe. Errors carry the node's gRPC code and message: NOT_FOUND for
// a collection the node has never seen, INVALID_ARGUMENT for a bad name,
// UNAVAILABLE when the node cannot be reached within the deadline.
#ifndef HILO_ADMIN_CLIENT_H_
#define HILO_ADMIN_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"

namespace hilo {

// One collection as a node stores it.
struct CollectionInfo {
  std::string name;
  int64_t max = 0;           // highest number handed out (or raised to)
  int64_t return_floor = 0;  // lowest `last` a return may carry
  absl::Time updated_at;     // time of the last change
  std::string node_tag;      // the node that answered
};

struct CollectionPage {
  std::vector<CollectionInfo> collections;
  std::string next_page_token;  // empty after the last page
};

struct FloorResult {
  bool raised = false;
  int64_t max = 0;
};

// grpc.health.v1 serving status.
enum class ServingStatus { kUnknown, kServing, kNotServing, kServiceUnknown };
absl::string_view ServingStatusName(ServingStatus status);

class AdminClient {
 public:
  // `credentials` null means plaintext. INVALID_ARGUMENT for an empty target
  // or a non-positive deadline.
  static absl::StatusOr<std::unique_ptr<AdminClient>> Create(
      const std::string& target,
      std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
      absl::Duration deadline = absl::Seconds(5));
  ~AdminClient();

  absl::StatusOr<CollectionInfo> GetCollection(absl::string_view collection);
  // `page_size` 0 means the server's default (100); at most 1000.
  absl::StatusOr<CollectionPage> ListCollections(int page_size,
                                                 absl::string_view page_token);
  absl::StatusOr<FloorResult> SetFloor(absl::string_view collection,
                                       int64_t floor);
  // Deletes a collection that never kept a number (Max and return floor 0);
  // FAILED_PRECONDITION naming its Max otherwise, NOT_FOUND if unknown.
  absl::Status DeleteCollection(absl::string_view collection);
  // Retires a collection whatever its Max (DeleteCollection with retire, in
  // hilo.proto): its row goes, and a later row of the name starts above
  // the Max returned here. NOT_FOUND if unknown; a server older than
  // retirement refuses a collection with Max > 0 (FAILED_PRECONDITION) and
  // answers 0 for one it deleted.
  absl::StatusOr<int64_t> RetireCollection(absl::string_view collection);
  // The status of `service` ("" asks about the node as a whole).
  absl::StatusOr<ServingStatus> CheckHealth(absl::string_view service = "");

 private:
  struct Stubs;
  AdminClient(std::string target, std::shared_ptr<grpc::Channel> channel,
              absl::Duration deadline);

  const std::string target_;
  const absl::Duration deadline_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stubs> stubs_;
};

// Channel credentials for TLS from PEM files: `ca` verifies the server
// (empty: the system's roots); `cert` and `key`, both or neither, are the
// client's own certificate for mTLS. UNAVAILABLE naming a file that cannot
// be read; INVALID_ARGUMENT if only one of cert and key is given.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
TlsCredentialsFromFiles(const std::string& ca, const std::string& cert = "",
                        const std::string& key = "");

}  // namespace hilo

#endif  // HILO_ADMIN_CLIENT_H_
