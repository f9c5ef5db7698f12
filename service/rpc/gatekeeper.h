// Gatekeeper: the authorization policy, the audit trail and the refusal
// counts, in front of HiLoService and AdminService, without gRPC.
//
// Each call resolves its caller once (Authorizer::Resolve: an unknown
// bearer token refuses the whole call, a ReturnRanges included, as
// UNAUTHENTICATED), then for each collection it names checks the name (so
// messages and audit lines only ever carry valid UTF-8) and asks the
// policy; a refusal
// (PERMISSION_DENIED, or UNAUTHENTICATED for an unknown bearer token) is
// audited, counted (Observer::OnDenied, reason "permission") and returned
// before anything reaches the store (a refused NextRange or ReturnRange is
// also reported to the observer as a finished call, as the service reports
// the calls it serves). An allowed call goes to the service;
// a guard-rail refusal coming back from the store is audited and counted
// (reason "guard_rail"), and every SetFloor and DeleteCollection is audited
// whatever its outcome. Refusals (and a SetFloor or DeleteCollection with a
// bad collection name) go to AuditLog::WriteRefusal, which limits them; the
// administrative calls that passed authorization are always written.
// Without an Authorizer every caller is allowed and none may administer
// (the guard rail holds for everyone): "trust every admitted client".
//
//   Gatekeeper gate(&service, &admin, authorizer, &audit, &metrics);
//   gate.NextRange(caller, request, &response, [](absl::Status s) {...});
//
// Thread-safe.
#ifndef HILO_SERVICE_RPC_GATEKEEPER_H_
#define HILO_SERVICE_RPC_GATEKEEPER_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "hilo/v1/hilo.pb.h"
#include "service/access/audit_log.h"
#include "service/access/authorizer.h"
#include "service/observe/log_limiter.h"
#include "service/observe/observer.h"
#include "service/rpc/admin_service.h"
#include "service/rpc/hilo_service.h"

namespace hilo {

class Gatekeeper {
 public:
  // `service` and `admin` must outlive this, and so must `authorizer` (null:
  // trust every caller), `audit` (null: no audit trail) and `observer`
  // (null: none).
  Gatekeeper(HiLoService* service, AdminService* admin,
             const Authorizer* authorizer, AuditLog* audit, Observer* observer);

  // What names the database in the store's messages (its file's path, the
  // PostgreSQL address): a store failure whose message holds one of them
  // reaches clients as its code and a short reason, the detail going to the
  // log. Messages that hold none (a collection's row locked, the file
  // lost) reach clients as they are. None set (the default): every store
  // failure is replaced so. Call before serving.
  void HideFromClients(std::vector<std::string> database_names) {
    database_names_ = std::move(database_names);
  }

  // Whether a caller's bearer token is looked at: only an Authorizer
  // resolves one, so without it a transport need not read the call's
  // authorization metadata (Caller's token fields may stay empty).
  bool ReadsTokens() const { return authorizer_ != nullptr; }

  // As the services' methods, for `caller`. `request` and `response` must
  // stay valid until `done` runs.
  void NextRange(const Caller& caller,
                 const hilo::v1::NextRangeRequest& request,
                 hilo::v1::NextRangeResponse* response, ServiceCallback done);
  void ReturnRange(const Caller& caller,
                   const hilo::v1::ReturnRangeRequest& request,
                   hilo::v1::ReturnRangeResponse* response,
                   ServiceCallback done);
  // The caller is resolved once for the whole call: an unknown bearer token
  // refuses it whole (UNAUTHENTICATED, one audit line, counted once as a
  // refused ReturnRange). Otherwise each item is admitted as a ReturnRange
  // of its own: a refused item gets its refusal as its result (and is
  // audited and counted as a refused ReturnRange); the others go to the
  // service together.
  void ReturnRanges(const Caller& caller,
                    const hilo::v1::ReturnRangesRequest& request,
                    hilo::v1::ReturnRangesResponse* response,
                    ServiceCallback done);
  void GetCollection(const Caller& caller,
                     const hilo::v1::GetCollectionRequest& request,
                     hilo::v1::GetCollectionResponse* response,
                     ServiceCallback done);
  void ListCollections(const Caller& caller,
                       const hilo::v1::ListCollectionsRequest& request,
                       hilo::v1::ListCollectionsResponse* response,
                       ServiceCallback done);
  void SetFloor(const Caller& caller, const hilo::v1::SetFloorRequest& request,
                hilo::v1::SetFloorResponse* response, ServiceCallback done);
  void DeleteCollection(const Caller& caller,
                        const hilo::v1::DeleteCollectionRequest& request,
                        hilo::v1::DeleteCollectionResponse* response,
                        ServiceCallback done);

 private:
  // Who the caller is (none without an Authorizer).
  std::optional<Principal> Resolve(const Caller& caller,
                                   absl::string_view rpc) const;
  // Checks the call `record` describes (its method, collection and the
  // numbers asked for) for `who` (null: allowed); fills record->identity.
  // On a refusal, audits and counts it and returns it; *may_administer
  // tells the caller's right.
  absl::Status Admit(const Caller& caller, const Principal* who, Method method,
                     AuditRecord* record, bool* may_administer,
                     CreationQuota* quota = nullptr);
  // Resolve, then Admit: a call that names one collection.
  absl::Status Admit(const Caller& caller, Method method, AuditRecord* record,
                     bool* may_administer, CreationQuota* quota = nullptr);
  // The line of an administrative call that passed authorization: always
  // written.
  void Audit(AuditRecord record, const absl::Status& outcome);
  // The line of a refused call: limited by the AuditLog.
  void AuditRefusal(AuditRecord record, const absl::Status& outcome);
  // `status` as a client may see it: a failure of the store itself
  // (UNAVAILABLE, RESOURCE_EXHAUSTED that is no refusal of a new
  // collection, INTERNAL, DATA_LOSS, UNKNOWN) keeps its code and gets a
  // short reason instead of its message, which may name the database's
  // path or address; that message goes to the server's log (rate-limited).
  absl::Status ForClient(absl::Status status);
  // `done`, given ForClient of the status.
  ServiceCallback ClientSafe(ServiceCallback done);

  HiLoService* const service_;
  AdminService* const admin_;
  const Authorizer* const authorizer_;
  AuditLog* const audit_;
  Observer* const observer_;
  // Paces the log lines of store failures ForClient hides from clients.
  LogLimiter store_errors_{/*lines_per_second=*/5, /*max_line_bytes=*/1024};
  std::vector<std::string> database_names_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_GATEKEEPER_H_
