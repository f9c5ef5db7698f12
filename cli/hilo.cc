// hilo: the command-line tool for hilo nodes, built on the C++ client.
//
//   hilo next orders -n 3        # three document IDs
//   hilo get orders              # stored state of a collection
//   hilo list                    # every collection, paged through
//   hilo set-floor orders 5000   # raise Max (never lowers it)
//   hilo delete orders-typo      # delete a collection never used
//   hilo retire old-orders       # retire one; its numbers never repeat
//   hilo health                  # SERVING / NOT_SERVING
//
// Exit codes: 0 done; 1 the server refused or could not be reached (one line
// on stderr with the gRPC code and message); 2 bad usage (an unknown flag, a
// value a flag cannot take, a port out of range, a wrong command).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "hilo/admin_client.h"
#include "hilo/base/command_line.h"
#include "hilo/base/host_port.h"
#include "hilo/base/json_quote.h"
#include "hilo/client.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "server address (gRPC target syntax)");
ABSL_FLAG(bool, json, false, "print JSON for scripts");
ABSL_FLAG(int64_t, n, 1, "with next: how many IDs to print");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "deadline of each RPC");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA that signed the server's certificate; turns TLS on");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate (mTLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM key of --tls_cert");

namespace {

constexpr int kExitRpcError = 1;
constexpr int kExitUsage = 2;

int Usage(const std::string& problem) {
  absl::FPrintF(stderr, "hilo: %s\n%s\n", problem, absl::ProgramUsageMessage());
  return kExitUsage;
}

// Whether `status` says no connection could be made (rather than a server
// that answered UNAVAILABLE).
bool NotConnected(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         (absl::StrContains(status.message(), "failed to connect") ||
          absl::StrContains(status.message(), "DNS resolution failed"));
}

int Failed(const absl::Status& status) {
  const std::string target = absl::GetFlag(FLAGS_target);
  absl::FPrintF(
      stderr, "hilo: %s: %s%s\n", absl::StatusCodeToString(status.code()),
      status.message(),
      NotConnected(status)
          ? absl::StrCat("; is hilo_server running on ", target,
                         "? Check --target (and --tls_ca if it serves TLS)")
          : "");
  return kExitRpcError;
}

// A --target that is not a gRPC URI (dns:///..., unix:...) must be
// HOST:PORT with a port gRPC will not change: gRPC would dial a bare HOST
// on port 443, where no hilo_server listens by default, and wrap 80000 to
// 14464.
absl::Status CheckTarget(const std::string& target) {
  if (hilo::base::IsSchemeAddress(target)) return absl::OkStatus();
  absl::StatusOr<hilo::base::HostPort> split =
      hilo::base::SplitHostPort(target);
  if (split.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--target=", target, ": ", split.status().message(),
                   "; give HOST:PORT, such as 127.0.0.1:50051 (hilo_server's "
                   "default)"));
}

using ::hilo::base::JsonQuote;

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

std::string CollectionJson(const hilo::CollectionInfo& c) {
  return absl::StrFormat(
      "{\"name\":%s,\"max\":%d,\"return_floor\":%d,\"updated_at\":%s,"
      "\"node_tag\":%s}",
      JsonQuote(c.name), c.max, c.return_floor,
      JsonQuote(Rfc3339(c.updated_at)), JsonQuote(c.node_tag));
}

std::string CollectionLine(const hilo::CollectionInfo& c) {
  return absl::StrFormat("%s\tmax %d\treturn_floor %d\tupdated %s\tnode %s",
                         c.name, c.max, c.return_floor, Rfc3339(c.updated_at),
                         c.node_tag);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials() {
  const std::string ca = absl::GetFlag(FLAGS_tls_ca);
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  if (ca.empty() && cert.empty() && key.empty()) {
    return std::shared_ptr<grpc::ChannelCredentials>();
  }
  return hilo::TlsCredentialsFromFiles(ca, cert, key);
}

int Next(const std::string& collection,
         std::shared_ptr<grpc::ChannelCredentials> credentials) {
  const int64_t n = absl::GetFlag(FLAGS_n);
  if (n < 1) return Usage(absl::StrCat("-n is ", n, "; it must be at least 1"));
  hilo::ClientOptions options;
  options.targets = {absl::GetFlag(FLAGS_target)};
  options.rpc_deadline = absl::GetFlag(FLAGS_timeout);
  options.credentials = std::move(credentials);
  // One short-lived process: no background fetching.
  options.prefetch_at = 0;
  absl::StatusOr<std::unique_ptr<hilo::Client>> client =
      hilo::Client::Create(options);
  if (!client.ok()) return Failed(client.status());
  std::vector<std::string> ids;
  for (int64_t i = 0; i < n; ++i) {
    absl::StatusOr<std::string> id = (*client)->NextDocumentId(collection);
    if (!id.ok()) return Failed(id.status());
    ids.push_back(*std::move(id));
  }
  // The destructor hands the unused tail back.
  if (absl::GetFlag(FLAGS_json)) {
    std::vector<std::string> quoted;
    for (const std::string& id : ids) quoted.push_back(JsonQuote(id));
    absl::PrintF("{\"ids\":[%s]}\n", absl::StrJoin(quoted, ","));
  } else {
    for (const std::string& id : ids) absl::PrintF("%s\n", id);
  }
  return EXIT_SUCCESS;
}

int Admin(const std::vector<std::string>& args,
          std::shared_ptr<grpc::ChannelCredentials> credentials) {
  const std::string& command = args[0];
  absl::StatusOr<std::unique_ptr<hilo::AdminClient>> admin =
      hilo::AdminClient::Create(absl::GetFlag(FLAGS_target),
                                std::move(credentials),
                                absl::GetFlag(FLAGS_timeout));
  if (!admin.ok()) return Failed(admin.status());
  const bool json = absl::GetFlag(FLAGS_json);

  if (command == "get") {
    if (args.size() != 2) return Usage("usage: hilo get COLLECTION");
    absl::StatusOr<hilo::CollectionInfo> c = (*admin)->GetCollection(args[1]);
    if (!c.ok()) return Failed(c.status());
    absl::PrintF("%s\n", json ? CollectionJson(*c) : CollectionLine(*c));
    return EXIT_SUCCESS;
  }
  if (command == "list") {
    if (args.size() != 1) return Usage("usage: hilo list");
    std::vector<std::string> out;
    std::string token;
    do {
      absl::StatusOr<hilo::CollectionPage> page =
          (*admin)->ListCollections(1000, token);
      if (!page.ok()) return Failed(page.status());
      for (const hilo::CollectionInfo& c : page->collections) {
        out.push_back(json ? CollectionJson(c) : CollectionLine(c));
      }
      token = page->next_page_token;
    } while (!token.empty());
    if (json) {
      absl::PrintF("{\"collections\":[%s]}\n", absl::StrJoin(out, ","));
    } else {
      for (const std::string& line : out) absl::PrintF("%s\n", line);
    }
    return EXIT_SUCCESS;
  }
  if (command == "set-floor") {
    int64_t floor = 0;
    if (args.size() != 3 || !absl::SimpleAtoi(args[2], &floor)) {
      return Usage("usage: hilo set-floor COLLECTION FLOOR");
    }
    absl::StatusOr<hilo::FloorResult> r = (*admin)->SetFloor(args[1], floor);
    if (!r.ok()) return Failed(r.status());
    if (json) {
      absl::PrintF("{\"raised\":%s,\"max\":%d}\n", r->raised ? "true" : "false",
                   r->max);
    } else {
      absl::PrintF("%s: max %d (%s)\n", args[1], r->max,
                   r->raised ? "raised" : "already at or above the floor");
    }
    return EXIT_SUCCESS;
  }
  if (command == "delete") {
    if (args.size() != 2) return Usage("usage: hilo delete COLLECTION");
    if (absl::Status s = (*admin)->DeleteCollection(args[1]); !s.ok()) {
      return Failed(s);
    }
    if (json) {
      absl::PrintF("{\"deleted\":%s}\n", JsonQuote(args[1]));
    } else {
      absl::PrintF("%s: deleted\n", args[1]);
    }
    return EXIT_SUCCESS;
  }
  if (command == "retire") {
    if (args.size() != 2) return Usage("usage: hilo retire COLLECTION");
    absl::StatusOr<int64_t> max = (*admin)->RetireCollection(args[1]);
    if (!max.ok()) return Failed(max.status());
    if (json) {
      absl::PrintF("{\"retired\":%s,\"max\":%d}\n", JsonQuote(args[1]), *max);
    } else {
      absl::PrintF("%s: retired at Max %d\n", args[1], *max);
    }
    return EXIT_SUCCESS;
  }
  if (command == "health") {
    if (args.size() != 1) return Usage("usage: hilo health");
    absl::StatusOr<hilo::ServingStatus> s = (*admin)->CheckHealth();
    if (!s.ok()) return Failed(s.status());
    const absl::string_view name = hilo::ServingStatusName(*s);
    // A literal format per call: under clang, absl checks it at compile time.
    if (json) {
      absl::PrintF("{\"status\":%s}\n", JsonQuote(name));
    } else {
      absl::PrintF("%s\n", name);
    }
    return *s == hilo::ServingStatus::kServing ? EXIT_SUCCESS : kExitRpcError;
  }
  return Usage(absl::StrCat("unknown command \"", command, "\""));
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args = hilo::base::ParseCommandLine(
      argc, argv, "hilo",
      "usage: hilo [--target=HOST:PORT] [--json] COMMAND\n"
      "commands:\n"
      "  next COLLECTION [-n N]     print N document IDs\n"
      "  get COLLECTION             show a collection's stored state\n"
      "  list                       list every collection\n"
      "  set-floor COLLECTION N     raise a collection's Max to at least N\n"
      "  delete COLLECTION          delete a collection that never kept a "
      "number\n"
      "  retire COLLECTION          retire a collection: its row goes, and a\n"
      "                             new one of the name starts above its Max\n"
      "  health                     print the node's serving status",
      {
          {"Connection",
           {"target", "timeout", "tls_ca", "tls_cert", "tls_key"}},
          {"Output", {"json", "n"}},
      },
      kExitUsage);
  if (args.empty()) return Usage("no command given");
  if (absl::Status s = CheckTarget(absl::GetFlag(FLAGS_target)); !s.ok()) {
    return Usage(std::string(s.message()));
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      Credentials();
  if (!credentials.ok()) return Failed(credentials.status());
  if (args[0] == "next") {
    if (args.size() != 2) return Usage("usage: hilo next COLLECTION [-n N]");
    return Next(args[1], *credentials);
  }
  return Admin(args, *credentials);
}
