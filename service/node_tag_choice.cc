#include "service/node_tag_choice.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "service/store/validation.h"

namespace hilo {

absl::StatusOr<NodeTagChoice> ChooseNodeTag(
    const NodeTagRequest& request,
    absl::FunctionRef<absl::StatusOr<std::string>()> hostname) {
  NodeTagChoice choice;
  choice.defaulted = request.node_tag.empty() && !request.from_hostname &&
                     !request.hashed_from_hostname;
  if (choice.defaulted && request.require_chosen) {
    return absl::InvalidArgumentError(
        "--require_node_tag: no node tag given; give this node its own "
        "--node_tag (1-4 characters of A-Z and 0-9, different from every "
        "other node serving the same collections), or "
        "--node_tag_from_hostname");
  }
  choice.node_tag = request.node_tag.empty() ? "A" : request.node_tag;
  if (request.from_hostname) {
    absl::StatusOr<std::string> name = hostname();
    if (!name.ok()) return name.status();
    absl::StatusOr<std::string> tag = NodeTagFromHostname(*name);
    if (!tag.ok()) return tag.status();
    choice.node_tag = *tag;
  }
  if (request.hashed_from_hostname) {
    if (!request.shared_store) {
      return absl::InvalidArgumentError(
          "--node_tag_hashed_from_hostname needs --store: with a database "
          "per node, two nodes with one tag would hand out the same IDs");
    }
    absl::StatusOr<std::string> name = hostname();
    if (!name.ok()) return name.status();
    std::vector<std::string> tags =
        NodeTagsHashedFromHostname(*name, kHashedNodeTags);
    choice.node_tag = tags.front();
    choice.alternates.assign(tags.begin() + 1, tags.end());
  }
  return choice;
}

std::string DefaultNodeTagNote(const NodeTagChoice& choice) {
  return choice.defaulted ? "; node tag A because no --node_tag was given: "
                            "every other node serving the same collections "
                            "needs its own"
                          : "";
}

}  // namespace hilo
