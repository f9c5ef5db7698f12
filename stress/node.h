// Node: one hilo_server that hilo_stress started, its tag, its database
// and a connection of the orchestrator's own, with the calls the
// orchestrator and the faults make on it, each with a deadline of
// kAdminDeadline.
//
//   Node node;  // tag, db_path and process set by the orchestrator
//   node.Connect();
//   hilo::v1::NextRangeResponse range;
//   grpc::Status s = NextRange(node, "fill-probe", &range);
//
// Not thread-safe: the orchestrator's one thread uses it.
#ifndef HILO_STRESS_NODE_H_
#define HILO_STRESS_NODE_H_

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "testing/server_process.h"

namespace hilo::stress {

inline constexpr absl::Duration kAdminDeadline = absl::Seconds(5);

struct Node {
  std::string tag;
  std::string db_path;  // its own database file (none with a shared store)
  std::unique_ptr<testing_util::ServerProcess> process;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<hilo::v1::HiLo::Stub> hilo;
  std::unique_ptr<hilo::v1::HiLoAdmin::Stub> admin;

  // A new channel and stubs to the process's address.
  void Connect();
};

// (stub->*call)(request) with a deadline of kAdminDeadline.
template <typename Request, typename Response, typename Stub, typename Call>
grpc::Status CallWithDeadline(Stub* stub, Call call, const Request& request,
                              Response* response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kAdminDeadline));
  return (stub->*call)(&context, request, response);
}

// NextRange(collection) as a new client asks it.
grpc::Status NextRange(Node& node, const std::string& collection,
                       hilo::v1::NextRangeResponse* response);

grpc::Status GetCollection(Node& node, const std::string& collection,
                           hilo::v1::GetCollectionResponse* response);

}  // namespace hilo::stress

#endif  // HILO_STRESS_NODE_H_
