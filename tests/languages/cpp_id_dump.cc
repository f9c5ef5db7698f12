// cpp_id_dump: prints document IDs drawn by the C++ hilo::Client, one per
// line, for tests that compare them with IDs from other languages.
//
//   cpp_id_dump TARGET COLLECTION COUNT THREADS [ROUNDS]
//
// Draws COUNT IDs of COLLECTION from TARGET with THREADS threads sharing one
// client. With ROUNDS > 1 the draw is split into that many rounds, each with
// a new client that is destroyed at the end of its round (so it hands its
// unused tail back). IDs are printed after the last round. Exits 1 on the
// first error, naming it on stderr.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "hilo/client.h"

namespace {

bool ParseCount(const char* text, int64_t min, int64_t* out) {
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < min) return false;
  *out = value;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t count = 0;
  int64_t threads = 0;
  int64_t rounds = 1;
  if ((argc != 5 && argc != 6) || !ParseCount(argv[3], 0, &count) ||
      !ParseCount(argv[4], 1, &threads) ||
      (argc == 6 && !ParseCount(argv[5], 1, &rounds))) {
    std::fprintf(stderr, "usage: %s TARGET COLLECTION COUNT THREADS [ROUNDS]\n",
                 argv[0]);
    return 2;
  }
  const std::string collection = argv[2];

  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(count));
  std::mutex mu;
  std::string error;

  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t in_round = count / rounds + (round < count % rounds ? 1 : 0);
    hilo::ClientOptions options;
    options.targets = {argv[1]};
    absl::StatusOr<std::unique_ptr<hilo::Client>> client =
        hilo::Client::Create(options);
    if (!client.ok()) {
      std::fprintf(stderr, "cpp_id_dump: %s\n",
                   client.status().ToString().c_str());
      return 1;
    }
    std::vector<std::thread> workers;
    for (int64_t t = 0; t < threads; ++t) {
      const int64_t share =
          in_round / threads + (t < in_round % threads ? 1 : 0);
      workers.emplace_back([&, share] {
        std::vector<std::string> mine;
        mine.reserve(static_cast<size_t>(share));
        for (int64_t i = 0; i < share; ++i) {
          absl::StatusOr<std::string> id =
              (*client)->NextDocumentId(collection);
          if (!id.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            if (error.empty()) error = id.status().ToString();
            return;
          }
          mine.push_back(*std::move(id));
        }
        std::lock_guard<std::mutex> lock(mu);
        for (std::string& id : mine) ids.push_back(std::move(id));
      });
    }
    for (std::thread& w : workers) w.join();
    if (!error.empty()) {
      std::fprintf(stderr, "cpp_id_dump: %s\n", error.c_str());
      return 1;
    }
    // The client's destructor hands the unused tail back here.
  }

  for (const std::string& id : ids) std::printf("%s\n", id.c_str());
  return std::fflush(stdout) == 0 ? 0 : 1;
}
