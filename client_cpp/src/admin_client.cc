#include "hilo/admin_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client_cpp/src/attribution.h"
#include "client_cpp/src/monotonic_clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "hilo/base/file.h"
#include "hilo/v1/conversions.h"
#include "hilo/v1/hilo.grpc.pb.h"

namespace hilo {
namespace {

CollectionInfo FromProto(const hilo::v1::Collection& c,
                         const std::string& node_tag) {
  CollectionInfo info;
  info.name = c.name();
  info.max = c.max();
  info.return_floor = c.return_floor();
  info.updated_at = FromProtoTimeUnchecked(c.updated_at());
  info.node_tag = node_tag;
  return info;
}

}  // namespace

absl::string_view ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown:
      break;
  }
  return "UNKNOWN";
}

struct AdminClient::Stubs {
  std::unique_ptr<hilo::v1::HiLoAdmin::Stub> admin;
  std::unique_ptr<grpc::GenericStub> generic;
};

absl::StatusOr<std::unique_ptr<AdminClient>> AdminClient::Create(
    const std::string& target,
    std::shared_ptr<grpc::ChannelCredentials> credentials,
    absl::Duration deadline) {
  if (target.empty()) return absl::InvalidArgumentError("target is empty");
  if (deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("deadline must be positive");
  }
  auto channel = grpc::CreateChannel(
      target, credentials != nullptr ? credentials
                                     : grpc::InsecureChannelCredentials());
  return std::unique_ptr<AdminClient>(
      new AdminClient(target, std::move(channel), deadline));
}

AdminClient::AdminClient(std::string target,
                         std::shared_ptr<grpc::Channel> channel,
                         absl::Duration deadline)
    : target_(std::move(target)),
      deadline_(deadline),
      channel_(std::move(channel)),
      stubs_(new Stubs{hilo::v1::HiLoAdmin::NewStub(channel_),
                       std::make_unique<grpc::GenericStub>(channel_)}) {}

AdminClient::~AdminClient() = default;

absl::StatusOr<CollectionInfo> AdminClient::GetCollection(
    absl::string_view collection) {
  grpc::ClientContext context;
  context.set_deadline(internal::DeadlineIn(deadline_));
  hilo::v1::GetCollectionRequest request;
  request.set_collection(std::string(collection));
  hilo::v1::GetCollectionResponse response;
  const grpc::Status status =
      stubs_->admin->GetCollection(&context, request, &response);
  if (!status.ok())
    return internal::AttributedTo(target_, FromGrpcStatus(status));
  return FromProto(response.collection(), response.node_tag());
}

absl::StatusOr<CollectionPage> AdminClient::ListCollections(
    int page_size, absl::string_view page_token) {
  grpc::ClientContext context;
  context.set_deadline(internal::DeadlineIn(deadline_));
  hilo::v1::ListCollectionsRequest request;
  request.set_page_size(page_size);
  request.set_page_token(std::string(page_token));
  hilo::v1::ListCollectionsResponse response;
  const grpc::Status status =
      stubs_->admin->ListCollections(&context, request, &response);
  if (!status.ok())
    return internal::AttributedTo(target_, FromGrpcStatus(status));
  CollectionPage page;
  for (const hilo::v1::Collection& c : response.collections()) {
    page.collections.push_back(FromProto(c, response.node_tag()));
  }
  page.next_page_token = response.next_page_token();
  return page;
}

absl::StatusOr<FloorResult> AdminClient::SetFloor(absl::string_view collection,
                                                  int64_t floor) {
  grpc::ClientContext context;
  context.set_deadline(internal::DeadlineIn(deadline_));
  hilo::v1::SetFloorRequest request;
  request.set_collection(std::string(collection));
  request.set_floor(floor);
  hilo::v1::SetFloorResponse response;
  const grpc::Status status =
      stubs_->admin->SetFloor(&context, request, &response);
  if (!status.ok())
    return internal::AttributedTo(target_, FromGrpcStatus(status));
  return FloorResult{response.raised(), response.max()};
}

absl::Status AdminClient::DeleteCollection(absl::string_view collection) {
  grpc::ClientContext context;
  context.set_deadline(internal::DeadlineIn(deadline_));
  hilo::v1::DeleteCollectionRequest request;
  request.set_collection(std::string(collection));
  hilo::v1::DeleteCollectionResponse response;
  const grpc::Status status =
      stubs_->admin->DeleteCollection(&context, request, &response);
  if (!status.ok())
    return internal::AttributedTo(target_, FromGrpcStatus(status));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> AdminClient::RetireCollection(
    absl::string_view collection) {
  grpc::ClientContext context;
  context.set_deadline(internal::DeadlineIn(deadline_));
  hilo::v1::DeleteCollectionRequest request;
  request.set_collection(std::string(collection));
  request.set_retire(true);
  hilo::v1::DeleteCollectionResponse response;
  const grpc::Status status =
      stubs_->admin->DeleteCollection(&context, request, &response);
  if (!status.ok())
    return internal::AttributedTo(target_, FromGrpcStatus(status));
  return response.retired_max();
}

absl::StatusOr<ServingStatus> AdminClient::CheckHealth(
    absl::string_view service) {
  // grpc.health.v1.HealthCheckRequest { string service = 1; }, encoded by
  // hand: the message is one optional length-delimited field.
  std::string request_bytes;
  if (!service.empty() && service.size() < 128) {
    request_bytes.push_back(0x0A);
    request_bytes.push_back(static_cast<char>(service.size()));
    request_bytes.append(service.data(), service.size());
  } else if (!service.empty()) {
    return absl::InvalidArgumentError("service name is too long");
  }
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(internal::DeadlineIn(deadline_));
  grpc::CompletionQueue cq;
  grpc::Status status;
  auto call = stubs_->generic->PrepareUnaryCall(
      &context, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok())
    return internal::AttributedTo(target_, FromGrpcStatus(status));
  // HealthCheckResponse { ServingStatus status = 1; } : 08 <varint>, or
  // nothing at all for UNKNOWN (0).
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    return absl::InternalError("cannot read the health response");
  }
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (bytes.empty()) return ServingStatus::kUnknown;
  if (bytes.size() != 2 || bytes[0] != 0x08) {
    return absl::InternalError(absl::StrCat(
        target_, ": unexpected health response of ", bytes.size(), " bytes"));
  }
  switch (bytes[1]) {
    case 1:
      return ServingStatus::kServing;
    case 2:
      return ServingStatus::kNotServing;
    case 3:
      return ServingStatus::kServiceUnknown;
    default:
      return ServingStatus::kUnknown;
  }
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
TlsCredentialsFromFiles(const std::string& ca, const std::string& cert,
                        const std::string& key) {
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs its key, and a key its certificate");
  }
  grpc::SslCredentialsOptions options;
  if (!ca.empty()) {
    absl::StatusOr<std::string> pem = base::ReadPemFile(ca, "CA");
    if (!pem.ok()) return pem.status();
    options.pem_root_certs = *pem;
  }
  if (!cert.empty()) {
    absl::StatusOr<std::string> pem =
        base::ReadPemFile(cert, "client certificate");
    if (!pem.ok()) return pem.status();
    absl::StatusOr<std::string> pem_key = base::ReadPemFile(key, "client key");
    if (!pem_key.ok()) return pem_key.status();
    options.pem_cert_chain = *pem;
    options.pem_private_key = *pem_key;
  }
  return grpc::SslCredentials(options);
}

}  // namespace hilo
