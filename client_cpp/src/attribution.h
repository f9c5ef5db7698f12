// Error messages that say which server they came from.
#ifndef HILO_CLIENT_CPP_SRC_ATTRIBUTION_H_
#define HILO_CLIENT_CPP_SRC_ATTRIBUTION_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace hilo::internal {

// `status` with its message after "`server`: "; OK stays OK.
inline absl::Status AttributedTo(absl::string_view server,
                                 const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(server, ": ", status.message()));
}

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_ATTRIBUTION_H_
