#include "service/access/audit_log.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/validation.h"

namespace hilo {
namespace {

// The length of the valid UTF-8 sequence at the start of `s`, or 0.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto continuation = [&](size_t i) {
    return i < s.size() && (byte(i) & 0xC0) == 0x80;
  };
  const unsigned char b = byte(0);
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return continuation(1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return 0;
    if (b == 0xE0 && byte(1) < 0xA0) return 0;   // overlong
    if (b == 0xED && byte(1) >= 0xA0) return 0;  // a surrogate
    return 3;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    if (b == 0xF0 && byte(1) < 0x90) return 0;   // overlong
    if (b == 0xF4 && byte(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

// The code point of the valid UTF-8 sequence of `length` bytes at the
// start of `s`.
uint32_t CodePoint(absl::string_view s, size_t length) {
  const auto byte = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<unsigned char>(s[i]));
  };
  switch (length) {
    case 1:
      return byte(0);
    case 2:
      return (byte(0) & 0x1F) << 6 | (byte(1) & 0x3F);
    case 3:
      return (byte(0) & 0x0F) << 12 | (byte(1) & 0x3F) << 6 | (byte(2) & 0x3F);
    default:
      return (byte(0) & 0x07) << 18 | (byte(1) & 0x3F) << 12 |
             (byte(2) & 0x3F) << 6 | (byte(3) & 0x3F);
  }
}

// Characters a reader may take for the end of a line, or that reorder
// what a terminal shows: C0 and C1 controls and DEL (U+000B, U+000C and
// U+0085 among them), the line and paragraph separators U+2028 and U+2029,
// and the bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
// U+2066-U+2069).
bool MustEscape(uint32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x061C || c == 0x200E ||
         c == 0x200F || (c >= 0x2028 && c <= 0x202E) ||
         (c >= 0x2066 && c <= 0x2069);
}

std::string JsonTime(absl::Time time) {
  return JsonString(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", time, absl::UTCTimeZone()));
}

// The kMaxSummaryTop largest counts, largest first (then by key), as a
// JSON object.
std::string JsonTop(const absl::flat_hash_map<std::string, int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> top(counts.begin(),
                                                   counts.end());
  const auto before = [](const std::pair<std::string, int64_t>& a,
                         const std::pair<std::string, int64_t>& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  const size_t n = std::min<size_t>(top.size(), kMaxSummaryTop);
  std::partial_sort(top.begin(), top.begin() + n, top.end(), before);
  std::string out = "{";
  for (size_t i = 0; i < n; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ",", JsonString(top[i].first), ":",
                    top[i].second);
  }
  out += "}";
  return out;
}

// Counts one more for `key`, unless `counts` is full and lacks it.
void CountKey(absl::flat_hash_map<std::string, int64_t>* counts,
              absl::string_view key) {
  auto it = counts->find(key);
  if (it != counts->end()) {
    ++it->second;
  } else if (counts->size() < static_cast<size_t>(kMaxSummaryKeys)) {
    counts->emplace(std::string(key), 1);
  }
}

constexpr absl::string_view kAnonymousCaller = "anonymous";

std::string JsonCounts(const std::map<std::string, int64_t>& counts) {
  std::string out = "{";
  for (const auto& [key, count] : counts) {
    absl::StrAppend(&out, out.size() == 1 ? "" : ",", JsonString(key), ":",
                    count);
  }
  out += "}";
  return out;
}

}  // namespace

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  while (!text.empty()) {
    const unsigned char c = static_cast<unsigned char>(text[0]);
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      absl::StrAppend(&out, "\\ufffd");
      text.remove_prefix(1);
      continue;
    }
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (const uint32_t code = CodePoint(text, length);
               MustEscape(code)) {
      absl::StrAppendFormat(&out, "\\u%04x", code);
    } else {
      out.append(text.data(), length);
    }
    text.remove_prefix(length);
  }
  out += '"';
  return out;
}

std::string AuditCaller(absl::string_view identity, absl::string_view peer) {
  if (identity != kAnonymousCaller) return std::string(identity);
  // "ipv4:10.0.0.9:41234", "ipv6:[::1]:41234": the port is the client's
  // choice, the address is not.
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    const size_t colon = peer.rfind(':');
    if (colon > 4 && colon + 1 < peer.size() &&
        peer.find_first_not_of("0123456789", colon + 1) ==
            absl::string_view::npos) {
      peer = peer.substr(0, colon);
    }
  }
  return absl::StrCat(kAnonymousCaller, " ", peer);
}

std::string AuditJson(const AuditRecord& record, absl::Time time) {
  std::string request = "{";
  for (size_t i = 0; i < record.request.size(); ++i) {
    absl::StrAppend(&request, i == 0 ? "" : ",",
                    JsonString(record.request[i].first), ":",
                    record.request[i].second);
  }
  request += "}";
  return absl::StrCat(
      "{\"time\":", JsonTime(time),
      ",\"identity\":", JsonString(record.identity),
      ",\"peer\":", JsonString(record.peer),
      ",\"method\":", JsonString(record.method), ",\"collection\":",
      // A refused name can be as long as a request (64 KB, 384 KB escaped);
      // its refusal message gives the length.
      JsonString(absl::string_view(record.collection)
                     .substr(0, kMaxCollectionNameBytes)),
      ",\"request\":", request,
      ",\"code\":", JsonString(absl::StatusCodeToString(record.outcome.code())),
      ",\"message\":", JsonString(record.outcome.message()), "}");
}

AuditLog::AuditLog(const Clock* clock, AuditLogOptions options)
    : AuditLog(clock, std::move(options), nullptr) {}

AuditLog::AuditLog(const Clock* clock, AuditLogOptions options,
                   std::unique_ptr<LineWriter> file)
    : clock_(clock),
      options_(std::move(options)),
      file_(std::move(file)),
      writer_(file_ != nullptr ? file_.get() : &StderrLines()) {}

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(
    const std::string& path, const Clock* clock, AuditLogOptions options) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "audit log %s cannot be opened: %s", path, std::strerror(errno)));
  }
  LineWriterOptions writer;
  writer.max_queued_bytes = options.max_queued_bytes;
  writer.on_dropped = options.on_line_dropped;
  // Both run on the writer's thread, which may outlive the log: they use
  // nothing of it.
  writer.dropped_line = [](int64_t count) {
    return absl::StrCat("{\"time\":", JsonTime(absl::Now()),
                        ",\"dropped\":{\"count\":", count, "}}");
  };
  writer.on_write_error = [path](const std::string& error) {
    StderrLines().Write(absl::StrFormat(
        "hilo_server: audit log %s: a write failed (%s); audit lines may be "
        "lost until it works again",
        path, error));
  };
  return std::unique_ptr<AuditLog>(new AuditLog(
      clock, std::move(options),
      std::make_unique<LineWriter>(fd, /*owns_fd=*/true, std::move(writer))));
}

AuditLog::~AuditLog() { Flush(); }

void AuditLog::Write(const AuditRecord& record) {
  base::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  AdvanceWindowLocked(now);
  WriteLineLocked(AuditJson(record, now));
}

void AuditLog::WriteRefusal(const AuditRecord& record) {
  {
    base::MutexLock lock(&mu_);
    // The time is read under the lock so that windows only move forward
    // between threads.
    const absl::Time now = clock_->Now();
    AdvanceWindowLocked(now);
    const std::string caller = AuditCaller(record.identity, record.peer);
    const bool anonymous = record.identity == kAnonymousCaller;
    auto it = lines_by_caller_.find(caller);
    const int lines = it == lines_by_caller_.end() ? 0 : it->second;
    const bool caller_may = options_.refusals_per_second == 0 ||
                            lines < options_.refusals_per_second;
    const bool anonymous_may =
        !anonymous || options_.anonymous_refusals_per_second == 0 ||
        anonymous_lines_ < options_.anonymous_refusals_per_second;
    if (caller_may && anonymous_may) {
      // Only callers with a line written are tracked: at most a line's
      // worth of memory each.
      if (it == lines_by_caller_.end()) {
        lines_by_caller_.emplace(caller, 1);
      } else {
        ++it->second;
      }
      if (anonymous) ++anonymous_lines_;
      WriteLineLocked(AuditJson(record, now));
      return;
    }
    if (suppressed_.count == 0) suppressed_.first = now;
    suppressed_.last = now;
    ++suppressed_.count;
    ++suppressed_.by_method[record.method];
    ++suppressed_.by_code[absl::StatusCodeToString(record.outcome.code())];
    CountKey(&suppressed_.by_caller, caller);
    if (!record.collection.empty()) {
      CountKey(&suppressed_.by_collection,
               absl::string_view(record.collection)
                   .substr(0, kMaxCollectionNameBytes));
    }
  }
  if (options_.on_suppressed) options_.on_suppressed();
}

void AuditLog::Flush() {
  {
    base::MutexLock lock(&mu_);
    // Reads the clock only when a summary is due: some tests destroy a
    // server after the clock they gave it, and the destructor flushes.
    if (suppressed_.count != 0) WriteSummaryLocked(clock_->Now());
  }
  WaitUntilWritten(kAuditFlushTimeout);
}

bool AuditLog::WaitUntilWritten(absl::Duration timeout) {
  return writer_->WaitUntilWritten(timeout);
}

void AuditLog::AdvanceWindowLocked(absl::Time now) {
  if (now >= window_start_ && now - window_start_ < absl::Seconds(1)) return;
  WriteSummaryLocked(now);
  window_start_ = now;
  lines_by_caller_.clear();
  anonymous_lines_ = 0;
}

void AuditLog::WriteSummaryLocked(absl::Time now) {
  if (suppressed_.count == 0) return;
  const std::string line = absl::StrCat(
      "{\"time\":", JsonTime(now),
      ",\"suppressed\":{\"count\":", suppressed_.count,
      ",\"first\":", JsonTime(suppressed_.first),
      ",\"last\":", JsonTime(suppressed_.last),
      ",\"by_method\":", JsonCounts(suppressed_.by_method),
      ",\"by_code\":", JsonCounts(suppressed_.by_code),
      ",\"top_callers\":", JsonTop(suppressed_.by_caller),
      ",\"top_collections\":", JsonTop(suppressed_.by_collection), "}}");
  suppressed_ = Suppressed();
  WriteLineLocked(line);
}

void AuditLog::WriteLineLocked(absl::string_view json) {
  // Queued under mu_, so lines keep the order of their decisions; never
  // waits for the reader.
  writer_->Write(json);
}

}  // namespace hilo
