#include "service/store/postgres/postgres_row_codec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "service/store/range_token.h"

namespace hilo {
namespace internal {

NamedCollectionState ReadRow(const PGresult* r, int row) {
  NamedCollectionState out;
  out.name.assign(PQgetvalue(r, row, 0), PQgetlength(r, row, 0));
  out.state.max = ReadInt64(r, row, 1);
  out.state.return_floor = ReadInt64(r, row, 2);
  out.state.updated_at = absl::FromUnixMicros(ReadInt64(r, row, 3));
  out.state.range_token = static_cast<uint64_t>(ReadInt64(r, row, 4));
  out.state.previous_token = static_cast<uint64_t>(ReadInt64(r, row, 5));
  out.state.previous_return_floor = ReadInt64(r, row, 6);
  return out;
}

int64_t ReadCeiling(const PGresult* r, int row) { return ReadInt64(r, row, 7); }

int64_t ReadIncarnation(const PGresult* r, int row) {
  return ReadInt64(r, row, 8);
}

int64_t NewIncarnation() { return static_cast<int64_t>(NewRangeToken() >> 1); }

void AddRow(absl::string_view name, const CollectionState& s, int64_t ceiling,
            int64_t incarnation, Params* p, std::string* values) {
  absl::StrAppend(values, values->empty() ? "(" : ", (", p->Next());
  p->Bytes(name);
  for (int64_t v : {s.max, s.return_floor, absl::ToUnixMicros(s.updated_at),
                    static_cast<int64_t>(s.range_token),
                    static_cast<int64_t>(s.previous_token),
                    s.previous_return_floor, ceiling, incarnation}) {
    absl::StrAppend(values, ", ", p->Next());
    p->Int64(v);
  }
  values->append(")");
}

std::string InList(const std::vector<std::string>& names, Params* p) {
  std::vector<std::string> refs;
  for (const std::string& name : names) {
    refs.push_back(p->Next());
    p->Bytes(name);
  }
  return absl::StrCat("IN (", absl::StrJoin(refs, ", "), ")");
}

std::string CreationLockKey(absl::string_view name_sql) {
  return absl::StrCat(
      "('x' || left(encode(sha256(coalesce((SELECT salt FROM hilo_lock_salt "
      "ORDER BY salt LIMIT 1), ''::bytea) || convert_to((SELECT nspname FROM "
      "pg_namespace WHERE oid = (SELECT relnamespace FROM pg_class WHERE "
      "oid = 'hilo_collections'::regclass)), 'UTF8') || "
      "'\\x00'::bytea || ",
      name_sql, "), 'hex'), 16))::bit(64)::bigint");
}

}  // namespace internal
}  // namespace hilo
