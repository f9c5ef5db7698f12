#include "stress/node.h"

#include "grpcpp/create_channel.h"

namespace hilo::stress {

void Node::Connect() {
  channel = grpc::CreateChannel(process->address(),
                                grpc::InsecureChannelCredentials());
  hilo = hilo::v1::HiLo::NewStub(channel);
  admin = hilo::v1::HiLoAdmin::NewStub(channel);
}

grpc::Status NextRange(Node& node, const std::string& collection,
                       hilo::v1::NextRangeResponse* response) {
  hilo::v1::NextRangeRequest request;
  request.set_collection(collection);
  return CallWithDeadline(node.hilo.get(), &hilo::v1::HiLo::Stub::NextRange,
                          request, response);
}

grpc::Status GetCollection(Node& node, const std::string& collection,
                           hilo::v1::GetCollectionResponse* response) {
  hilo::v1::GetCollectionRequest request;
  request.set_collection(collection);
  return CallWithDeadline(node.admin.get(),
                          &hilo::v1::HiLoAdmin::Stub::GetCollection, request,
                          response);
}

}  // namespace hilo::stress
