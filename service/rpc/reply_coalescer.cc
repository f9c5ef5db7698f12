#include "service/rpc/reply_coalescer.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace hilo {
namespace {

// "4" or "6", the address's bytes, the port's two bytes (network order).
std::string MakeKey(char family, const void* address, size_t size,
                    uint16_t port_network_order) {
  std::string key(1, family);
  key.append(static_cast<const char*>(address), size);
  key.append(reinterpret_cast<const char*>(&port_network_order), 2);
  return key;
}

std::string KeyOf(const sockaddr_storage& address, socklen_t size) {
  if (address.ss_family == AF_INET && size >= sizeof(sockaddr_in)) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    return MakeKey('4', &v4.sin_addr, 4, v4.sin_port);
  }
  if (address.ss_family == AF_INET6 && size >= sizeof(sockaddr_in6)) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
      return MakeKey('4', &v6.sin6_addr.s6_addr[12], 4, v6.sin6_port);
    }
    return MakeKey('6', &v6.sin6_addr, 16, v6.sin6_port);
  }
  return std::string();
}

// The key of the peer of `fd`, a connected IPv4 or IPv6 socket; empty for
// any other descriptor.
std::string PeerKeyOfSocket(int fd) {
  sockaddr_storage address;
  socklen_t size = sizeof address;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    return std::string();
  }
  return KeyOf(address, size);
}

// The local port of `fd` if it is an IPv4 or IPv6 TCP socket.
std::optional<uint16_t> LocalTcpPortOf(int fd) {
  int type = 0;
  socklen_t size = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) != 0 ||
      type != SOCK_STREAM) {
    return std::nullopt;
  }
  sockaddr_storage address;
  size = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    return std::nullopt;
  }
  if (address.ss_family == AF_INET && size >= sizeof(sockaddr_in)) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  }
  if (address.ss_family == AF_INET6 && size >= sizeof(sockaddr_in6)) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return std::nullopt;
}

bool SetCork(int fd, int on) {
  return setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on) == 0;
}

}  // namespace

ReplyCoalescer::ReplyCoalescer(Options options, const Clock* clock)
    : options_(options), clock_(clock), scanner_([this] { ScanWhenAsked(); }) {}

std::string ReplyCoalescer::PeerKeyOf(absl::string_view grpc_peer) {
  // gRPC may percent-encode the brackets and colons of an IPv6 address.
  std::string decoded;
  absl::string_view rest = grpc_peer;
  if (absl::StrContains(grpc_peer, '%')) {
    decoded = absl::StrReplaceAll(
        grpc_peer, {{"%5B", "["}, {"%5D", "]"}, {"%3A", ":"}, {"%25", "%"}});
    rest = decoded;
  }
  const bool v4 = absl::ConsumePrefix(&rest, "ipv4:");
  if (!v4 && !absl::ConsumePrefix(&rest, "ipv6:")) return std::string();
  const size_t colon = rest.rfind(':');
  if (colon == absl::string_view::npos) return std::string();
  absl::string_view host = rest.substr(0, colon);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(rest.substr(colon + 1), &port) || port > 65535) {
    return std::string();
  }
  const uint16_t port_network_order = htons(static_cast<uint16_t>(port));
  if (v4) {
    in_addr address;
    if (inet_pton(AF_INET, std::string(host).c_str(), &address) != 1) {
      return std::string();
    }
    return MakeKey('4', &address, 4, port_network_order);
  }
  if (!absl::ConsumePrefix(&host, "[") || !absl::ConsumeSuffix(&host, "]")) {
    return std::string();
  }
  host = host.substr(0, host.find('%'));  // a zone names no other peer
  in6_addr address;
  if (inet_pton(AF_INET6, std::string(host).c_str(), &address) != 1) {
    return std::string();
  }
  if (IN6_IS_ADDR_V4MAPPED(&address)) {
    return MakeKey('4', &address.s6_addr[12], 4, port_network_order);
  }
  return MakeKey('6', &address, 16, port_network_order);
}

ReplyCoalescer::~ReplyCoalescer() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  scanner_.join();
}

void ReplyCoalescer::BeforeReply(absl::string_view peer) {
  CompletionBatch* batch = CompletionBatch::Current();
  if (batch == nullptr) return;
  std::string key = PeerKeyOf(peer);
  if (key.empty()) return;
  int fd = -1;
  {
    base::MutexLock lock(&mu_);
    auto [it, first] = pending_.try_emplace(batch);
    if (first) batch->Join(this);
    Pending& pending = it->second;
    Caller& caller = pending.callers[key];
    ++caller.replies;
    if (caller.done) return;
    if (caller.replies == 1) {
      auto known = sockets_.find(key);
      if (known == sockets_.end()) {
        ++counts_.not_found;
        pending.missed = true;
        caller.done = true;
        return;
      }
      caller.fd = known->second.fd;
      // Held only from its second reply, a caller with many calls in
      // flight let its first go alone and the server saved under half as
      // much CPU. Held from its first always, 1,000 callers with a call in
      // flight each paid three system calls a reply for nothing: 0.80 to
      // 0.87 x the NextRange/s. Held from its second whenever its last
      // batch gave it one, 2 callers with 32 each got 1.18 x the
      // NextRange/s instead of 1.27 x (BENCHMARKS.md, History, 2026-12-06).
      if (known->second.lone_batches >= options_.lone_batches) return;
    }
    caller.done = true;  // held now, or never in this batch
    fd = caller.fd;
  }
  // The system calls outside the lock, which other store threads take.
  const bool same_socket = PeerKeyOfSocket(fd) == key;
  const bool corked = same_socket && SetCork(fd, 1);
  base::MutexLock lock(&mu_);
  Pending& pending = pending_[batch];
  if (corked) {
    pending.corked.push_back(fd);
    ++counts_.corked;
  } else if (!same_socket) {
    // Closed, or its descriptor now another socket's.
    if (auto known = sockets_.find(key);
        known != sockets_.end() && known->second.fd == fd) {
      sockets_.erase(known);
    }
    ++counts_.not_found;
    pending.missed = true;
  }
}

void ReplyCoalescer::OnBatchEnd(const CompletionBatch& batch) {
  Pending pending;
  {
    base::MutexLock lock(&mu_);
    auto it = pending_.find(&batch);
    if (it == pending_.end()) return;
    pending = std::move(it->second);
    pending_.erase(it);
    // What each known caller got in this batch decides whether its next
    // holds it from the first reply.
    for (const auto& [key, caller] : pending.callers) {
      if (caller.fd < 0) continue;
      if (auto known = sockets_.find(key);
          known != sockets_.end() && known->second.fd == caller.fd) {
        int& lone = known->second.lone_batches;
        if (caller.replies >= 2) {
          lone = 0;
        } else if (lone < options_.lone_batches) {
          ++lone;
        }
      }
    }
    if (pending.missed && scan_ == Scan::kIdle && clock_->Now() >= next_scan_) {
      scan_ = Scan::kAsked;  // the scanner wakes when the lock is let go
    }
  }
  // Clearing TCP_CORK sends what the batch's replies queued.
  for (int fd : pending.corked) SetCork(fd, 0);
}

bool ReplyCoalescer::WaitForScansForTesting(absl::Duration timeout) {
  base::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                  mu_) { return scan_ == Scan::kIdle; },
                              timeout);
}

void ReplyCoalescer::ScanWhenAsked() {
  for (;;) {
    {
      base::MutexLock lock(&mu_);
      mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || scan_ == Scan::kAsked;
      });
      if (stopping_) return;
      scan_ = Scan::kRunning;
    }
    // On this thread, outside the lock: a scan of many descriptors holds
    // up no commit and no reply.
    const absl::Time start = clock_->Now();
    absl::flat_hash_map<std::string, Socket> found =
        ScanAcceptedSockets(options_.lone_batches);
    const absl::Time end = clock_->Now();
    const double share = std::clamp(options_.max_scan_share, 1e-6, 1.0);
    base::MutexLock lock(&mu_);
    // A socket the last scan found too keeps what its batches taught.
    for (auto& [key, socket] : found) {
      if (auto old = sockets_.find(key);
          old != sockets_.end() && old->second.fd == socket.fd) {
        socket.lone_batches = old->second.lone_batches;
      }
    }
    sockets_.swap(found);  // the old map is freed after the lock
    counts_.known = static_cast<int64_t>(sockets_.size());
    next_scan_ = end + std::max(options_.min_scan_interval,
                                (end - start) * ((1 - share) / share));
    scan_ = Scan::kIdle;
    ++counts_.scans;
  }
}

ReplyCoalescer::Counts ReplyCoalescer::counts() const {
  base::MutexLock lock(&mu_);
  return counts_;
}

absl::flat_hash_map<std::string, ReplyCoalescer::Socket>
ReplyCoalescer::ScanAcceptedSockets(int lone_batches) {
  struct Connected {
    int fd;
    uint16_t local_port;
    std::string peer;
  };
  std::vector<Connected> connected;
  absl::flat_hash_set<uint16_t> listening;
  if (DIR* dir = opendir("/proc/self/fd"); dir != nullptr) {
    const int own = dirfd(dir);
    while (const dirent* entry = readdir(dir)) {
      int fd = -1;
      if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == own) continue;
      const std::optional<uint16_t> port = LocalTcpPortOf(fd);
      if (!port.has_value()) continue;
      int accepting = 0;
      socklen_t size = sizeof accepting;
      if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &size) != 0) {
        continue;
      }
      if (accepting != 0) {
        listening.insert(*port);
      } else if (std::string peer = PeerKeyOfSocket(fd); !peer.empty()) {
        connected.push_back({fd, *port, std::move(peer)});
      }
    }
    closedir(dir);
  }
  // Only a socket a listener of this process accepted is a caller's: a
  // connection this process made (to PostgreSQL, say) has a port of its own.
  absl::flat_hash_map<std::string, Socket> sockets;
  for (Connected& socket : connected) {
    if (listening.contains(socket.local_port)) {
      sockets[std::move(socket.peer)] = {socket.fd, lone_batches};
    }
  }
  return sockets;
}

}  // namespace hilo
