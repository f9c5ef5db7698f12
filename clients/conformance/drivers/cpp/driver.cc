// The C++ client's conformance driver (clients/conformance/PROTOCOL.md): one
// hilo::Client, driven by JSON lines on stdin, answered one line each on
// stdout. Requests are parsed with protobuf's JSON parser into a
// google.protobuf.Struct; answers are written by hand (flat objects).
//
// `close` is Client::ReturnUnusedRanges(): the C++ client stays usable after
// it, and fetches a new range on the next call (so it answers kept_open,
// with or without keep_open).
//
// A request with an "id" runs in a thread of its own and is answered with
// that id when done, while the next requests are read (PROTOCOL.md).
//
// `fork` forks this process; the child draws with the client it inherited,
// hands its ranges back, writes its answer to a pipe and ends (_exit, so
// nothing of the parent's is flushed or destroyed twice).

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/security/credentials.h"
#include "hilo/base/json_quote.h"
#include "hilo/client.h"

namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

using ::hilo::base::JsonQuote;

std::string Error(const std::string& code, const std::string& message) {
  return absl::StrCat("{\"ok\": false, \"code\": ", JsonQuote(code),
                      ", \"message\": ", JsonQuote(message), "}");
}

std::string Error(const absl::Status& status) {
  return Error(absl::StatusCodeToString(status.code()),
               std::string(status.message()));
}

// A request field, or null if absent.
const Value* Field(const Struct& request, const std::string& name) {
  auto it = request.fields().find(name);
  return it == request.fields().end() ? nullptr : &it->second;
}

// Thrown (only inside this file) for a request the driver cannot use.
struct BadRequest {
  std::string message;
};

std::string StringField(const Struct& request, const std::string& name) {
  const Value* v = Field(request, name);
  if (v == nullptr || v->kind_case() != Value::kStringValue) {
    throw BadRequest{absl::StrCat("missing string field \"", name, "\"")};
  }
  return v->string_value();
}

double NumberField(const Struct& request, const std::string& name,
                   double fallback) {
  const Value* v = Field(request, name);
  if (v == nullptr) return fallback;
  if (v->kind_case() != Value::kNumberValue) {
    throw BadRequest{absl::StrCat("field \"", name, "\" is not a number")};
  }
  return v->number_value();
}

class Driver {
 public:
  std::string Handle(const std::string& op, const Struct& request) {
    if (op == "open") return Open(request);
    if (client_ == nullptr) return Error("DRIVER", "no client: open first");
    if (op == "next_id") {
      absl::StatusOr<hilo::Id> id =
          client_->NextId(StringField(request, "collection"));
      if (!id.ok()) return Error(id.status());
      return absl::StrCat("{\"ok\": true, \"number\": \"", id->number,
                          "\", \"tag\": ", JsonQuote(std::string(id->node_tag)),
                          "}");
    }
    if (op == "next_document_id") {
      absl::StatusOr<std::string> id =
          client_->NextDocumentId(StringField(request, "collection"));
      if (!id.ok()) return Error(id.status());
      return absl::StrCat("{\"ok\": true, \"document_id\": ", JsonQuote(*id),
                          "}");
    }
    if (op == "draw") return Draw(request);
    if (op == "fork") return Fork(request);
    if (op == "stats") return Stats();
    if (op == "close") {
      client_->ReturnUnusedRanges();
      return "{\"ok\": true, \"kept_open\": true}";
    }
    return Error("DRIVER", absl::StrCat("unknown op \"", op, "\""));
  }

 private:
  std::string Open(const Struct& request) {
    client_.reset();  // hands its ranges back first
    hilo::ClientOptions options;
    const Value* targets = Field(request, "targets");
    if (targets == nullptr || targets->kind_case() != Value::kListValue) {
      throw BadRequest{"open needs a list \"targets\""};
    }
    for (const Value& t : targets->list_value().values()) {
      options.targets.push_back(t.string_value());
    }
    if (Field(request, "separator") != nullptr) {
      const std::string separator = StringField(request, "separator");
      if (separator.size() != 1) {
        return Error(
            "INVALID_ARGUMENT",
            absl::StrCat("separator \"", separator, "\" is not one character"));
      }
      options.separator = separator[0];
    }
    options.prefetch_at = NumberField(request, "prefetch_at", 0.2);
    options.rpc_deadline =
        absl::Milliseconds(NumberField(request, "rpc_deadline_ms", 5000));
    if (Field(request, "ca_file") != nullptr) {
      const std::string path = StringField(request, "ca_file");
      std::ifstream in(path);
      if (!in) return Error("DRIVER", absl::StrCat("cannot read ", path));
      std::stringstream pem;
      pem << in.rdbuf();
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = pem.str();
      options.credentials = grpc::SslCredentials(ssl);
    }
    absl::StatusOr<std::unique_ptr<hilo::Client>> client =
        hilo::Client::Create(std::move(options));
    if (!client.ok()) return Error(client.status());
    client_ = std::move(*client);
    return "{\"ok\": true}";
  }

  std::string Draw(const Struct& request) {
    const std::string collection = StringField(request, "collection");
    const int callers = static_cast<int>(NumberField(request, "callers", 1));
    const bool has_count = Field(request, "count") != nullptr;
    const int64_t count =
        static_cast<int64_t>(NumberField(request, "count", 0));
    const bool has_millis = Field(request, "millis") != nullptr;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(
                           NumberField(request, "millis", 0)));
    const Value* keep = Field(request, "keep_going");
    const bool keep_going = keep != nullptr && keep->bool_value();
    if (callers < 1 || (!has_count && !has_millis)) {
      throw BadRequest{"draw needs callers >= 1 and count or millis"};
    }
    std::mutex mu;
    std::vector<std::string> ids;
    std::map<std::string, int64_t> errors;
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < callers; ++c) {
      threads.emplace_back([&] {
        std::vector<std::string> mine;
        std::map<std::string, int64_t> failed;
        ready.fetch_add(1);
        while (ready.load() < callers) std::this_thread::yield();
        hilo::CollectionHandle handle = client_->Collection(collection);
        for (int64_t n = 0;; ++n) {
          if (has_count && n >= count) break;
          if (has_millis && std::chrono::steady_clock::now() >= until) break;
          absl::StatusOr<std::string> id = handle.NextDocumentId();
          if (id.ok()) {
            mine.push_back(*std::move(id));
            continue;
          }
          ++failed[absl::StatusCodeToString(id.status().code())];
          if (!keep_going) break;
        }
        std::lock_guard<std::mutex> lock(mu);
        for (std::string& id : mine) ids.push_back(std::move(id));
        for (const auto& [code, n] : failed) errors[code] += n;
      });
    }
    for (std::thread& t : threads) t.join();
    return absl::StrCat("{\"ok\": true, ", IdsAndErrors(ids, errors), "}");
  }

  // "document_ids": [...], "errors": {...}
  static std::string IdsAndErrors(
      const std::vector<std::string>& ids,
      const std::map<std::string, int64_t>& errors) {
    std::string out = "\"document_ids\": [";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ", ";
      out += JsonQuote(ids[i]);
    }
    out += "], \"errors\": {";
    bool first = true;
    for (const auto& [code, n] : errors) {
      if (!first) out += ", ";
      first = false;
      absl::StrAppend(&out, JsonQuote(code), ": \"", n, "\"");
    }
    return out + "}";
  }

  std::string Fork(const Struct& request) {
    const std::string collection = StringField(request, "collection");
    const int64_t count =
        static_cast<int64_t>(NumberField(request, "count", 0));
    int fds[2];
    if (pipe(fds) != 0) return Error("DRIVER", "pipe failed");
    std::cout.flush();
    const pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      return Error("DRIVER", "fork failed");
    }
    if (pid == 0) {
      close(fds[0]);
      std::vector<std::string> ids;
      std::map<std::string, int64_t> errors;
      for (int64_t n = 0; n < count; ++n) {
        absl::StatusOr<std::string> id = client_->NextDocumentId(collection);
        if (!id.ok()) {
          ++errors[absl::StatusCodeToString(id.status().code())];
          break;
        }
        ids.push_back(*std::move(id));
      }
      client_->ReturnUnusedRanges();
      const std::string out = IdsAndErrors(ids, errors);
      for (size_t done = 0; done < out.size();) {
        const ssize_t n = write(fds[1], out.data() + done, out.size() - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
      _exit(0);
    }
    close(fds[1]);
    std::string body;
    char buffer[4096];
    while (true) {
      const ssize_t n = read(fds[0], buffer, sizeof(buffer));
      if (n <= 0) break;
      body.append(buffer, static_cast<size_t>(n));
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || body.empty()) {
      return Error("DRIVER", absl::StrFormat("the forked child ended with "
                                             "status %d and no answer",
                                             status));
    }
    return absl::StrCat("{\"ok\": true, \"forked\": true, ", body, "}");
  }

  std::string Stats() {
    const hilo::ClientStats s = client_->stats();
    return absl::StrFormat(
        "{\"ok\": true, \"stats\": {\"calls_waited\": \"%d\", "
        "\"ranges_fetched\": \"%d\", \"ranges_prefetched\": \"%d\", "
        "\"failovers\": \"%d\", \"returns_applied\": \"%d\", "
        "\"returns_refused\": \"%d\", \"returns_failed\": \"%d\"}}",
        s.calls_waited, s.ranges_fetched, s.ranges_prefetched, s.failovers,
        s.returns_applied, s.returns_refused, s.returns_failed);
  }

  std::unique_ptr<hilo::Client> client_;
};

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  Driver driver;
  std::mutex out_mu;  // one answer line at a time
  auto write = [&out_mu](const std::string& answer) {
    std::lock_guard<std::mutex> lock(out_mu);
    std::cout << answer << std::endl;
  };
  // Requests that carry an "id" are answered from threads of their own,
  // while the next requests are read (PROTOCOL.md); joined before exit.
  std::vector<std::thread> in_flight;
  auto join_all = [&in_flight] {
    for (std::thread& t : in_flight) t.join();
  };
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Struct request;
    const auto parsed =
        google::protobuf::util::JsonStringToMessage(line, &request);
    const Value* op = Field(request, "op");
    if (!parsed.ok() || op == nullptr ||
        op->kind_case() != Value::kStringValue) {
      write(Error("DRIVER", absl::StrCat("cannot parse request: ", line)));
      continue;
    }
    if (op->string_value() == "exit") {
      write("{\"ok\": true}");
      join_all();
      return 0;
    }
    auto answer_to = [&driver](const std::string& name, const Struct& req) {
      try {
        return driver.Handle(name, req);
      } catch (const BadRequest& bad) {
        return Error("DRIVER", bad.message);
      }
    };
    const Value* id = Field(request, "id");
    if (id != nullptr && id->kind_case() == Value::kStringValue) {
      in_flight.emplace_back([answer_to, write, request,
                              name = op->string_value(),
                              tag = id->string_value()] {
        std::string answer = answer_to(name, request);
        // Every answer is a flat object that ends in '}'.
        answer.insert(answer.size() - 1,
                      absl::StrCat(", \"id\": ", JsonQuote(tag)));
        write(answer);
      });
      continue;
    }
    write(answer_to(op->string_value(), request));
  }
  join_all();
  return 0;
}
