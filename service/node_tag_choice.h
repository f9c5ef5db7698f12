// ChooseNodeTag: which tag a node issues its IDs under, from what its
// operator said (hilo_server's --node_tag, --node_tag_from_hostname,
// --node_tag_hashed_from_hostname and --require_node_tag).
//
//   NodeTagRequest request;
//   request.from_hostname = true;
//   absl::StatusOr<NodeTagChoice> choice = ChooseNodeTag(request, HostName);
//   // hilo-2 -> choice->node_tag == "C"
//
// The rules: a tag derived from the host name overrides --node_tag, a
// hashed one overrides both; no tag given at all is A, for a single node,
// unless the operator required a tag. A hashed tag needs a shared store
// (which leases tags): two nodes with a database each could hash to one tag
// and nothing would stop them.
#ifndef HILO_SERVICE_NODE_TAG_CHOICE_H_
#define HILO_SERVICE_NODE_TAG_CHOICE_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace hilo {

// Tags a --node_tag_hashed_from_hostname server may try.
inline constexpr int kHashedNodeTags = 64;

// What the operator asked for.
struct NodeTagRequest {
  // --node_tag; empty: none given.
  std::string node_tag;
  bool from_hostname = false;
  bool hashed_from_hostname = false;
  // Refuse to start on the implicit A.
  bool require_chosen = false;
  // Whether the node serves a shared store (--store).
  bool shared_store = false;
};

struct NodeTagChoice {
  std::string node_tag;
  // With a hashed tag: the next tags to try if another live server holds
  // node_tag (ServerOptions::node_tag_alternates).
  std::vector<std::string> alternates;
  // No tag was given: node_tag is A by default, which the start-up line
  // says (DefaultNodeTagNote).
  bool defaulted = false;
};

// The tag `request` asks for; `hostname` is called only for a tag derived
// from the host name. INVALID_ARGUMENT naming the flag for a required tag
// that is missing, a hashed tag without a shared store, or a host name
// without an ordinal (NodeTagFromHostname); `hostname`'s own error as is.
// The tag itself is checked later, by ValidateServerOptions.
absl::StatusOr<NodeTagChoice> ChooseNodeTag(
    const NodeTagRequest& request,
    absl::FunctionRef<absl::StatusOr<std::string>()> hostname);

// What the start-up line adds when the tag is A by default, "" otherwise.
std::string DefaultNodeTagNote(const NodeTagChoice& choice);

}  // namespace hilo

#endif  // HILO_SERVICE_NODE_TAG_CHOICE_H_
