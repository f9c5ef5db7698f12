// fuzz_seed_replay: runs range_store_fuzzer.cc's LLVMFuzzerTestOneInput
// once on each file named on the command line, without libFuzzer, so the
// main build (any compiler) can replay the committed seeds. Built with
// HILO_FUZZ_TRACE, it prints the operation trace of each input on stdout;
// fuzz/check_seed_traces.sh compares that against fuzz/seed_traces/.
// Exits 0 when every input ran with every invariant kept (a broken one
// aborts), 2 when an input cannot be read.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "fuzz_seed_replay: cannot read %s\n", argv[i]);
      return 2;
    }
    const std::vector<uint8_t> input((std::istreambuf_iterator<char>(file)),
                                     std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  return 0;
}
