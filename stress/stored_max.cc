#include "stress/stored_max.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "stress/code_counts.h"

namespace hilo::stress {

absl::StatusOr<std::map<std::string, int64_t>> ReadStoredMaxFromFile(
    const std::string& path) {
  SqliteRangeStoreOptions options;
  options.path = path;
  options.read_only = true;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(std::move(options));
  if (!store.ok()) return store.status();
  constexpr int kPage = 1000;
  std::map<std::string, int64_t> maxes;
  std::string after;
  while (true) {
    absl::StatusOr<std::vector<NamedCollectionState>> page =
        (*store)->List(after, kPage);
    if (!page.ok()) return page.status();
    for (const NamedCollectionState& c : *page) maxes[c.name] = c.state.max;
    if (page->size() < static_cast<size_t>(kPage)) return maxes;
    after = page->back().name;
  }
}

absl::StatusOr<std::map<std::string, int64_t>> ListStoredMax(Node& node) {
  std::map<std::string, int64_t> maxes;
  hilo::v1::ListCollectionsRequest request;
  request.set_page_size(1000);
  while (true) {
    hilo::v1::ListCollectionsResponse response;
    grpc::Status s = CallWithDeadline(
        node.admin.get(), &hilo::v1::HiLoAdmin::Stub::ListCollections, request,
        &response);
    if (!s.ok()) {
      return absl::UnavailableError(
          absl::StrFormat("ListCollections on node %s: %s %s", node.tag,
                          CodeName(s.error_code()), s.error_message()));
    }
    for (const hilo::v1::Collection& c : response.collections()) {
      maxes[c.name()] = c.max();
    }
    if (response.next_page_token().empty()) return maxes;
    request.set_page_token(response.next_page_token());
  }
}

}  // namespace hilo::stress
