// hilo_delaying_proxy: a hilo server that is `--delay` away. Forwards every
// HiLo RPC to `--upstream` after sleeping `--delay` (DelayingProxy), so that
// a client of any language can be measured against a distant server; the
// client benchmarks of bench/client_latency.sh share this one proxy.
//
//   hilo_delaying_proxy --upstream=127.0.0.1:50051 --delay=2ms
//   # prints "listening on 127.0.0.1:PORT", serves until SIGTERM or SIGINT
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/delaying_proxy.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

ABSL_FLAG(std::string, upstream, "",
          "the hilo_server to forward to, host:port");
ABSL_FLAG(absl::Duration, delay, absl::Milliseconds(2),
          "sleep before forwarding each call");
ABSL_FLAG(std::string, listen, "127.0.0.1:0",
          "address to serve on (port 0: any free port, printed)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Forwards HiLo RPCs to --upstream after --delay, for client "
      "benchmarks.\nUsage: hilo_delaying_proxy --upstream=HOST:PORT "
      "[--delay=2ms] [--listen=127.0.0.1:0]");
  absl::ParseCommandLine(argc, argv);
  const std::string upstream = absl::GetFlag(FLAGS_upstream);
  if (upstream.empty()) {
    std::fprintf(stderr, "hilo_delaying_proxy: --upstream is required\n");
    return 2;
  }
  hilo::bench::DelayingProxy proxy(
      grpc::CreateChannel(upstream, grpc::InsecureChannelCredentials()),
      absl::GetFlag(FLAGS_delay));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&proxy);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "hilo_delaying_proxy: cannot listen on %s\n",
                 absl::GetFlag(FLAGS_listen).c_str());
    return 1;
  }
  const std::string listen = absl::GetFlag(FLAGS_listen);
  std::printf("listening on %s:%d\n",
              listen.substr(0, listen.rfind(':')).c_str(), port);
  std::fflush(stdout);
  server->Wait();
  return 0;
}
