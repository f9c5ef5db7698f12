#include "service/rpc/gatekeeper.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/access/collection_limit.h"
#include "service/access/line_writer.h"
#include "service/store/collection_rules.h"
#include "service/store/validation.h"

namespace hilo {
namespace {

// What a client is told of the store's own failures, whose messages name
// the database (SQLite's path, PostgreSQL's address): the code, and this.
// On any error of the store nothing was changed (RangeStore).
std::optional<std::string> ClientMessage(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      // The services refuse new collections with it too, with a reason.
      if (!CollectionRefusalReason(status).empty()) return std::nullopt;
      return "the node's storage is full; nothing was changed: retry later, "
             "or on another node";
    case absl::StatusCode::kUnavailable:
      return "the database is unavailable; nothing was changed: retry, here "
             "or on another node";
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnknown:
      return "the store failed; nothing was changed (the server's log says "
             "why)";
    default:
      return std::nullopt;
  }
}

AuditRecord Record(const Caller& caller, Method method,
                   absl::string_view collection, AuditFields request) {
  AuditRecord record;
  record.peer = caller.peer;
  record.method = std::string(MethodName(method));
  record.collection = std::string(collection);
  record.request = std::move(request);
  return record;
}

}  // namespace

absl::Status Gatekeeper::ForClient(absl::Status status) {
  std::optional<std::string> message = ClientMessage(status);
  if (!message.has_value() || status.message() == *message) return status;
  if (!database_names_.empty() &&
      std::none_of(database_names_.begin(), database_names_.end(),
                   [&](const std::string& name) {
                     return !name.empty() &&
                            absl::StrContains(status.message(), name);
                   })) {
    return status;  // names no database: the client may read it
  }
  // The detail stays in the server's log, a few lines a second at most.
  if (std::optional<std::string> line =
          store_errors_.Admit(status.ToString())) {
    StderrLines().Write(absl::StrCat("hilo_server: ", *line));
  }
  return absl::Status(status.code(), *message);
}

ServiceCallback Gatekeeper::ClientSafe(ServiceCallback done) {
  return [this, done = std::move(done)](absl::Status status) mutable {
    done(ForClient(std::move(status)));
  };
}

Gatekeeper::Gatekeeper(HiLoService* service, AdminService* admin,
                       const Authorizer* authorizer, AuditLog* audit,
                       Observer* observer)
    : service_(service),
      admin_(admin),
      authorizer_(authorizer),
      audit_(audit),
      observer_(observer) {}

std::optional<Principal> Gatekeeper::Resolve(const Caller& caller,
                                             absl::string_view rpc) const {
  if (authorizer_ == nullptr) return std::nullopt;
  return authorizer_->Resolve(caller, rpc);
}

absl::Status Gatekeeper::Admit(const Caller& caller, Method method,
                               AuditRecord* record, bool* may_administer,
                               CreationQuota* quota) {
  const std::optional<Principal> who = Resolve(caller, MethodName(method));
  return Admit(caller, who ? &*who : nullptr, method, record, may_administer,
               quota);
}

absl::Status Gatekeeper::Admit(const Caller& caller, const Principal* who,
                               Method method, AuditRecord* record,
                               bool* may_administer, CreationQuota* quota) {
  *may_administer = false;
  record->identity = DisplayIdentity(caller);
  if (method != Method::kListCollections) {
    // The service would refuse it too; refusing it here keeps bytes that
    // are not UTF-8 out of refusal messages and audit lines.
    if (absl::Status s = ValidateCollectionName(record->collection); !s.ok()) {
      return s;
    }
  }
  if (who == nullptr) return absl::OkStatus();
  Decision decision = Authorizer::Check(*who, method, record->collection);
  record->identity = decision.identity;
  *may_administer = decision.may_administer;
  if (quota != nullptr) *quota = decision.creation_quota;
  if (!decision.status.ok()) {
    if (observer_ != nullptr) {
      observer_->OnDenied(MethodName(method), "permission");
    }
    AuditRefusal(*record, decision.status);
  }
  return decision.status;
}

void Gatekeeper::Audit(AuditRecord record, const absl::Status& outcome) {
  if (audit_ == nullptr) return;
  record.outcome = outcome;
  audit_->Write(record);
}

void Gatekeeper::AuditRefusal(AuditRecord record, const absl::Status& outcome) {
  if (audit_ == nullptr) return;
  record.outcome = outcome;
  audit_->WriteRefusal(record);
}

void Gatekeeper::NextRange(const Caller& caller,
                           const hilo::v1::NextRangeRequest& request,
                           hilo::v1::NextRangeResponse* response,
                           ServiceCallback done) {
  AuditRecord record = Record(
      caller, Method::kNextRange, request.collection(),
      {{"last_max", request.last_max()}, {"last_size", request.last_size()}});
  bool may_administer = false;
  CreationQuota quota;
  if (absl::Status s =
          Admit(caller, Method::kNextRange, &record, &may_administer, &quota);
      !s.ok()) {
    // Counted with the calls that reach the service.
    if (observer_ != nullptr) {
      observer_->OnNextRange(request.collection(), s, nullptr,
                             absl::ZeroDuration());
    }
    return done(std::move(s));
  }
  service_->NextRange(request, response, may_administer, std::move(quota),
                      [this, record = std::move(record),
                       done = std::move(done)](absl::Status status) mutable {
                        if (IsGuardRailRefusal(status)) {
                          if (observer_ != nullptr) {
                            observer_->OnDenied(record.method, "guard_rail");
                          }
                          AuditRefusal(std::move(record), status);
                        }
                        done(ForClient(std::move(status)));
                      });
}

void Gatekeeper::ReturnRange(const Caller& caller,
                             const hilo::v1::ReturnRangeRequest& request,
                             hilo::v1::ReturnRangeResponse* response,
                             ServiceCallback done) {
  AuditRecord record =
      Record(caller, Method::kReturnRange, request.collection(),
             {{"end", request.end()}, {"last", request.last()}});
  bool may_administer = false;
  if (absl::Status s =
          Admit(caller, Method::kReturnRange, &record, &may_administer);
      !s.ok()) {
    if (observer_ != nullptr) {
      observer_->OnReturnRange(request.collection(), s, nullptr,
                               absl::ZeroDuration());
    }
    return done(std::move(s));
  }
  service_->ReturnRange(request, response, ClientSafe(std::move(done)));
}

void Gatekeeper::ReturnRanges(const Caller& caller,
                              const hilo::v1::ReturnRangesRequest& request,
                              hilo::v1::ReturnRangesResponse* response,
                              ServiceCallback done) {
  // Too many items: refused whole by the service, before any is admitted.
  if (absl::Status s = CheckReturnRangesCount(request.returns_size());
      !s.ok()) {
    return done(std::move(s));
  }
  // One resolution for every item: with 1000 items and an unknown token,
  // one refusal, not 1000 (each of which once compared the token with
  // every configured one).
  const std::optional<Principal> who = Resolve(caller, "ReturnRanges");
  if (who.has_value() && !who->status.ok()) {
    AuditRecord record;
    record.identity = who->identity;
    record.peer = caller.peer;
    record.method = "ReturnRanges";
    record.request = {{"items", request.returns_size()}};
    if (observer_ != nullptr) {
      observer_->OnDenied(MethodName(Method::kReturnRange), "permission");
      observer_->OnReturnRange("", who->status, nullptr, absl::ZeroDuration());
    }
    AuditRefusal(std::move(record), who->status);
    return done(who->status);
  }
  std::vector<absl::Status> refusals(request.returns_size());
  for (int i = 0; i < request.returns_size(); ++i) {
    const hilo::v1::ReturnRangeRequest& item = request.returns(i);
    AuditRecord record = Record(caller, Method::kReturnRange, item.collection(),
                                {{"end", item.end()}, {"last", item.last()}});
    bool may_administer = false;
    refusals[i] = Admit(caller, who ? &*who : nullptr, Method::kReturnRange,
                        &record, &may_administer);
  }
  service_->ReturnRanges(
      request, std::move(refusals), response,
      [this, response, done = std::move(done)](absl::Status status) mutable {
        for (hilo::v1::ReturnRangeResult& result :
             *response->mutable_results()) {
          if (result.code() == 0) continue;
          const absl::Status item = ForClient(absl::Status(
              static_cast<absl::StatusCode>(result.code()), result.message()));
          result.set_message(std::string(item.message()));
        }
        done(ForClient(std::move(status)));
      });
}

void Gatekeeper::GetCollection(const Caller& caller,
                               const hilo::v1::GetCollectionRequest& request,
                               hilo::v1::GetCollectionResponse* response,
                               ServiceCallback done) {
  AuditRecord record =
      Record(caller, Method::kGetCollection, request.collection(), {});
  bool may_administer = false;
  if (absl::Status s =
          Admit(caller, Method::kGetCollection, &record, &may_administer);
      !s.ok()) {
    return done(std::move(s));
  }
  admin_->GetCollection(request, response, ClientSafe(std::move(done)));
}

void Gatekeeper::ListCollections(
    const Caller& caller, const hilo::v1::ListCollectionsRequest& request,
    hilo::v1::ListCollectionsResponse* response, ServiceCallback done) {
  AuditRecord record = Record(caller, Method::kListCollections, "",
                              {{"page_size", request.page_size()}});
  bool may_administer = false;
  if (absl::Status s =
          Admit(caller, Method::kListCollections, &record, &may_administer);
      !s.ok()) {
    return done(std::move(s));
  }
  admin_->ListCollections(request, response, ClientSafe(std::move(done)));
}

void Gatekeeper::SetFloor(const Caller& caller,
                          const hilo::v1::SetFloorRequest& request,
                          hilo::v1::SetFloorResponse* response,
                          ServiceCallback done) {
  AuditRecord record = Record(caller, Method::kSetFloor, request.collection(),
                              {{"floor", request.floor()}});
  bool may_administer = false;
  if (absl::Status s =
          Admit(caller, Method::kSetFloor, &record, &may_administer);
      !s.ok()) {
    // Every SetFloor is audited; Admit audited the refused ones. A bad name
    // costs nothing to send, so its line is a refusal's, limited.
    if (s.code() == absl::StatusCode::kInvalidArgument) {
      AuditRefusal(record, s);
    }
    return done(std::move(s));
  }
  admin_->SetFloor(
      request, response,
      [this, &request, response, record = std::move(record),
       done = std::move(done)](absl::Status status) mutable {
        if (observer_ != nullptr) {
          const FloorOutcome outcome{response->raised(), response->max()};
          observer_->OnSetFloor(request.collection(), status,
                                status.ok() ? &outcome : nullptr);
        }
        Audit(std::move(record), status);
        done(ForClient(std::move(status)));
      });
}

void Gatekeeper::DeleteCollection(
    const Caller& caller, const hilo::v1::DeleteCollectionRequest& request,
    hilo::v1::DeleteCollectionResponse* response, ServiceCallback done) {
  // A retirement says so; a delete's line is as it always was.
  AuditFields asked;
  if (request.retire()) asked.emplace_back("retire", 1);
  AuditRecord record = Record(caller, Method::kDeleteCollection,
                              request.collection(), std::move(asked));
  bool may_administer = false;
  if (absl::Status s =
          Admit(caller, Method::kDeleteCollection, &record, &may_administer);
      !s.ok()) {
    // Every DeleteCollection is audited; Admit audited the refused ones.
    if (s.code() == absl::StatusCode::kInvalidArgument) {
      AuditRefusal(record, s);
    }
    return done(std::move(s));
  }
  admin_->DeleteCollection(
      request, response,
      [this, record = std::move(record),
       done = std::move(done)](absl::Status status) mutable {
        Audit(std::move(record), status);
        done(ForClient(std::move(status)));
      });
}

}  // namespace hilo
