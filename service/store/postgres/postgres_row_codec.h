// The rows of table hilo_collections as the PostgreSQL store reads and
// writes them: the column list, a row read from a binary result, a row
// added to a multi-row VALUES list, and an IN list of names. Nothing here
// runs a statement. Private to service/store/postgres/.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_ROW_CODEC_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_ROW_CODEC_H_

#include <libpq-fe.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/store/postgres/postgres_connection.h"
#include "service/store/range_store.h"

namespace hilo {
namespace internal {

// The columns of hilo_collections, in the order ReadRow and AddRow use.
inline constexpr char kColumns[] =
    "name, max, return_floor, updated_at_us, range_token, previous_token, "
    "previous_return_floor";

// A row of hilo_collections, read in kColumns order, binary.
NamedCollectionState ReadRow(const PGresult* r, int row);

// Appends "($n, ...)" for `name` and `s` to `values` (", " between rows),
// its parameters to `p`, in kColumns order.
void AddRow(absl::string_view name, const CollectionState& s, Params* p,
            std::string* values);

// "IN ($1, $2, ...)" over `names`.
std::string InList(const std::vector<std::string>& names, Params* p);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_ROW_CODEC_H_
