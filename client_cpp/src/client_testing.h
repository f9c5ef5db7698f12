// Test-only construction of a Client over any RangeSource.
#ifndef HILO_CLIENT_CPP_SRC_CLIENT_TESTING_H_
#define HILO_CLIENT_CPP_SRC_CLIENT_TESTING_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "client_cpp/src/range_source.h"
#include "hilo/client.h"

namespace hilo {

// A Client whose ranges come from `source` instead of gRPC stubs.
// `options.targets` is not used. With `schedule`, prefetch tasks go to it
// (a test runs them when it chooses) instead of a background thread.
std::unique_ptr<Client> NewClientForTesting(
    ClientOptions options, std::unique_ptr<internal::RangeSource> source,
    std::function<void(std::function<void()>)> schedule = nullptr);

// How many collections `client` keeps an entry for.
size_t CollectionsForTesting(const Client& client);

}  // namespace hilo

#endif  // HILO_CLIENT_CPP_SRC_CLIENT_TESTING_H_
