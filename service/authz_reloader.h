// AuthzReloader: hilo_server's reload of the authorization files (on SIGHUP
// and every --authz_reload_interval), and the line it says about each:
// one when the policy in force changed, and one per distinct refusal of a
// bad file, not one at every check while the file stays bad.
//
//   AuthzReloader reloader(server.get());
//   if (std::optional<std::string> line = reloader.Reload()) Say(*line);
//
// Not thread-safe: one thread (main's) reloads.
#ifndef HILO_SERVICE_AUTHZ_RELOADER_H_
#define HILO_SERVICE_AUTHZ_RELOADER_H_

#include <optional>
#include <string>

#include "service/server.h"

namespace hilo {

class AuthzReloader {
 public:
  // `server` must outlive the reloader.
  explicit AuthzReloader(Server* server) : server_(server) {}

  // Server::ReloadAuthz, and what to say of it: "hilo_server: authz policy
  // FILE reloaded" (and that the token file is gone, if it is) when the
  // policy in force changed; "hilo_server: ERROR; keeping the policy in
  // force" for a refused file, unless the last reload was refused for the
  // same reason; nothing otherwise (unchanged files, no policy).
  std::optional<std::string> Reload();

 private:
  Server* const server_;
  // The reason of the last refused reload; empty after one that worked.
  std::string last_error_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_AUTHZ_RELOADER_H_
