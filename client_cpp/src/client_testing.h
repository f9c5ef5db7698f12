// Test-only construction of a Client over any RangeSource.
#ifndef HILO_CLIENT_CPP_SRC_CLIENT_TESTING_H_
#define HILO_CLIENT_CPP_SRC_CLIENT_TESTING_H_

#include <memory>

#include "client_cpp/src/range_source.h"
#include "hilo/client.h"

namespace hilo {

// A Client whose ranges come from `source` instead of gRPC stubs.
// `options.targets` is not used.
std::unique_ptr<Client> NewClientForTesting(
    ClientOptions options, std::unique_ptr<internal::RangeSource> source);

}  // namespace hilo

#endif  // HILO_CLIENT_CPP_SRC_CLIENT_TESTING_H_
