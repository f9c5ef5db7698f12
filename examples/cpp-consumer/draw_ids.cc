// draw_ids TARGET: draws three document IDs and one raw ID from the hilo
// server at TARGET (host:port), on the collection "invoices", and prints
// them one a line. Exits 1 with the error when the server cannot give them.
#include <cstdio>
#include <memory>
#include <string>

#include "hilo/client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: draw_ids HOST:PORT\n");
    return 2;
  }
  hilo::ClientOptions options;
  options.targets = {argv[1]};
  absl::StatusOr<std::unique_ptr<hilo::Client>> client =
      hilo::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "draw_ids: %s\n", client.status().ToString().c_str());
    return 1;
  }
  hilo::CollectionHandle invoices = (*client)->Collection("invoices");
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> id = invoices.NextDocumentId();
    if (!id.ok()) {
      std::fprintf(stderr, "draw_ids: %s\n", id.status().ToString().c_str());
      return 1;
    }
    std::printf("%s\n", id->c_str());
  }
  absl::StatusOr<hilo::Id> raw = invoices.NextId();
  if (!raw.ok()) {
    std::fprintf(stderr, "draw_ids: %s\n", raw.status().ToString().c_str());
    return 1;
  }
  std::printf("number %lld from node %s\n", static_cast<long long>(raw->number),
              std::string(raw->node_tag).c_str());
  return 0;
}
