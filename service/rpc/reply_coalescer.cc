#include "service/rpc/reply_coalescer.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

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

std::string PeerKeyOfSocket(int fd) {
  sockaddr_storage address;
  socklen_t size = sizeof address;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    return std::string();
  }
  int type = 0;
  socklen_t type_size = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_size) != 0 ||
      type != SOCK_STREAM) {
    return std::string();
  }
  return KeyOf(address, size);
}

bool SetCork(int fd, int on) {
  return setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on) == 0;
}

}  // namespace

ReplyCoalescer::ReplyCoalescer(Options options, const Clock* clock)
    : options_(options), clock_(clock) {}

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

void ReplyCoalescer::BeforeReply(absl::string_view peer) {
  CompletionBatch* batch = CompletionBatch::Current();
  if (batch == nullptr) return;
  std::string key = PeerKeyOf(peer);
  if (key.empty()) return;
  base::MutexLock lock(&mu_);
  auto [it, first] = pending_.try_emplace(batch);
  if (first) batch->Join(this);
  Pending& pending = it->second;
  if (++pending.replies[key] != 2) return;
  const int fd = FindSocket(key);
  if (fd < 0) {
    ++counts_.not_found;
    return;
  }
  if (SetCork(fd, 1)) {
    pending.corked.push_back(fd);
    ++counts_.corked;
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
  }
  // Clearing TCP_CORK sends what the batch's replies queued.
  for (int fd : pending.corked) SetCork(fd, 0);
}

ReplyCoalescer::Counts ReplyCoalescer::counts() const {
  base::MutexLock lock(&mu_);
  return counts_;
}

int ReplyCoalescer::FindSocket(const std::string& key) {
  if (auto it = sockets_.find(key); it != sockets_.end()) {
    if (PeerKeyOfSocket(it->second) == key) return it->second;
    sockets_.erase(it);  // closed, or its descriptor now another socket's
  }
  if (clock_->Now() < next_scan_) return -1;
  Scan();
  auto it = sockets_.find(key);
  return it == sockets_.end() ? -1 : it->second;
}

void ReplyCoalescer::Scan() {
  const absl::Time start = clock_->Now();
  ++counts_.scans;
  sockets_.clear();
  if (DIR* dir = opendir("/proc/self/fd"); dir != nullptr) {
    const int own = dirfd(dir);
    while (const dirent* entry = readdir(dir)) {
      int fd = -1;
      if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == own) continue;
      std::string key = PeerKeyOfSocket(fd);
      if (!key.empty()) sockets_[std::move(key)] = fd;
    }
    closedir(dir);
  }
  const absl::Time end = clock_->Now();
  const double share = std::clamp(options_.max_scan_share, 1e-6, 1.0);
  next_scan_ = end + std::max(options_.min_scan_interval,
                              (end - start) * ((1 - share) / share));
}

}  // namespace hilo
