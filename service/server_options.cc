#include "service/server_options.h"

#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "service/listen_address.h"
#include "service/store/validation.h"

namespace hilo {

namespace {

// The node tag, its alternates and the tag to re-tag a database from.
absl::Status ValidateNodeTags(const ServerOptions& options) {
  if (absl::Status s = ValidateNodeTag(options.node_tag); !s.ok()) return s;
  for (const std::string& tag : options.node_tag_alternates) {
    if (absl::Status s = ValidateNodeTag(tag); !s.ok()) return s;
  }
  if (!options.node_tag_alternates.empty() && options.postgres_uri.empty()) {
    return absl::InvalidArgumentError(
        "alternative node tags need a shared store: with a database per "
        "node, two nodes with one tag would hand out the same IDs");
  }
  if (!options.retag_database_from.empty()) {
    if (!options.postgres_uri.empty()) {
      return absl::InvalidArgumentError(
          "--retag_database is for an SQLite database (--db); on a shared "
          "store the tags are leased, not kept with the numbers");
    }
    if (absl::Status s = ValidateNodeTag(options.retag_database_from);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// The sizes, counts and rates that bound what the node does and holds.
absl::Status ValidateLimits(const ServerOptions& options) {
  if (absl::Status s = ValidateRangeSizeLimits(options.range_sizes); !s.ok()) {
    return s;
  }
  if (options.max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max batch is %d; it must be at least 1", options.max_batch));
  }
  if (options.metrics_max_collections < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "metrics max collections is %d; it must not be negative",
        options.metrics_max_collections));
  }
  if (options.max_concurrent_streams < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max concurrent streams is %d; it must be at least 1",
                        options.max_concurrent_streams));
  }
  if (options.max_memory_bytes < (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max memory is %d bytes; it must be at least 1 MiB",
                        options.max_memory_bytes));
  }
  if (options.max_threads < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max threads is %d; it must be at least 2", options.max_threads));
  }
  if (options.max_list_reply_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max ListCollections reply bytes is %d; it must be at least 1",
        options.max_list_reply_bytes));
  }
  if (options.max_last_max_jump < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max last_max jump is %d; it must not be negative",
                        options.max_last_max_jump));
  }
  if (!(options.exhaustion_share > 0 && options.exhaustion_share <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "exhaustion share is %g; it must be above 0 and at most 1",
        options.exhaustion_share));
  }
  if (options.audit_refusals_per_second < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "audit refusals per second is %d; it must not be negative (0: no "
        "limit)",
        options.audit_refusals_per_second));
  }
  if (options.audit_anonymous_refusals_per_second < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "audit anonymous refusals per second is %d; it must not be negative "
        "(0: no limit)",
        options.audit_anonymous_refusals_per_second));
  }
  if (!options.authz_tokens.empty() && options.authz_policy.empty()) {
    return absl::InvalidArgumentError(
        "an authz token list needs an authz policy that names its tokens");
  }
  if (options.max_collections < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max collections is %d; it must not be negative (0: no limit)",
        options.max_collections));
  }
  if (options.max_collection_creations_per_minute < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max collection creations per minute is %d; it must not be negative "
        "(0: no limit)",
        options.max_collection_creations_per_minute));
  }
  return absl::OkStatus();
}

// The listener, its probe, the metrics endpoint and connection timings.
absl::Status ValidateConnections(const ServerOptions& options) {
  if (options.listener_probe_interval < absl::ZeroDuration() ||
      options.listener_probe_timeout <= absl::ZeroDuration() ||
      options.listener_probe_failures < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "listener probe every %s, timeout %s, %d failures: the interval must "
        "not be negative, the timeout must be positive and failures at "
        "least 1",
        absl::FormatDuration(options.listener_probe_interval),
        absl::FormatDuration(options.listener_probe_timeout),
        options.listener_probe_failures));
  }
  if (options.metrics_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("metrics threads is %d; it must be at least 1",
                        options.metrics_threads));
  }
  for (const auto& [name, d] :
       {std::pair{"max connection idle", options.max_connection_idle},
        std::pair{"max connection age", options.max_connection_age},
        std::pair{"max connection age grace", options.max_connection_age_grace},
        std::pair{"keepalive time", options.keepalive_time},
        std::pair{"keepalive timeout", options.keepalive_timeout},
        std::pair{"metrics request timeout",
                  options.metrics_request_timeout}}) {
    if (d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s is %s; it must be positive", name, absl::FormatDuration(d)));
    }
  }
  if (options.listen.empty()) {
    return absl::InvalidArgumentError("listen address is empty");
  }
  if (absl::Status s = CheckListenAddress(kListenFlag, options.listen);
      !s.ok()) {
    return s;
  }
  if (options.metrics_listen.empty()) return absl::OkStatus();
  return CheckListenAddress(kMetricsListenFlag, options.metrics_listen);
}

}  // namespace

absl::Status ValidateServerOptions(const ServerOptions& options) {
  if (absl::Status s = ValidateNodeTags(options); !s.ok()) return s;
  if (absl::Status s = ValidateLimits(options); !s.ok()) return s;
  return ValidateConnections(options);
}

}  // namespace hilo
