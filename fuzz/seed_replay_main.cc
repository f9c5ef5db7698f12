// fuzz_seed_replay: runs the store fuzzer's LLVMFuzzerTestOneInput without
// libFuzzer, so the main build (any compiler) can replay the committed seeds
// and run a bounded number of inputs against a store libFuzzer cannot reach
// (PostgreSQL, $HILO_FUZZ_POSTGRES_URI):
//
//   fuzz_seed_replay FILE...             each file once
//   fuzz_seed_replay --random=N[,SEED]   N inputs of up to 1 KiB of
//                                        pseudo-random bytes from SEED
//                                        (default 1): the same N every run
//
// Built with HILO_FUZZ_TRACE, it prints the operation trace of each input on
// stdout; fuzz/check_seed_traces.sh compares that against
// fuzz/seed_traces/. A broken rule aborts; the input that broke it is then
// written to ./fuzz-failed-input first (replay it with this program or the
// libFuzzer binary). Exits 0 when every input ran with every rule kept, 2
// for bad arguments or an input that cannot be read.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The input running now, for the abort handler.
const std::vector<uint8_t>* current = nullptr;

void SaveCurrentInput(int signal) {
  if (current != nullptr) {
    const int fd =
        open("fuzz-failed-input", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      [[maybe_unused]] ssize_t n = write(fd, current->data(), current->size());
      close(fd);
      static const char kSaved[] =
          "fuzz_seed_replay: the input is in ./fuzz-failed-input\n";
      [[maybe_unused]] ssize_t m = write(2, kSaved, sizeof(kSaved) - 1);
    }
  }
  ::signal(signal, SIG_DFL);
  raise(signal);
}

void Run(const std::vector<uint8_t>& input) {
  current = &input;
  LLVMFuzzerTestOneInput(input.data(), input.size());
  current = nullptr;
}

// splitmix64: a fixed stream of bytes for --random.
uint64_t Next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGABRT, SaveCurrentInput);
  if (argc == 2 && std::strncmp(argv[1], "--random=", 9) == 0) {
    char* rest = nullptr;
    const long count = std::strtol(argv[1] + 9, &rest, 10);
    uint64_t state = 1;
    if (*rest == ',') state = std::strtoull(rest + 1, &rest, 10);
    if (count < 1 || *rest != '\0') {
      std::fprintf(stderr, "fuzz_seed_replay: bad %s; want --random=N[,SEED]\n",
                   argv[1]);
      return 2;
    }
    for (long i = 0; i < count; ++i) {
      std::vector<uint8_t> input(Next(state) % 1025);
      for (uint8_t& byte : input) byte = static_cast<uint8_t>(Next(state));
      Run(input);
    }
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "fuzz_seed_replay: cannot read %s\n", argv[i]);
      return 2;
    }
    Run(std::vector<uint8_t>((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>()));
  }
  return 0;
}
