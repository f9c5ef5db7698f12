"""Peers: which driver (client) a connection to a proxy comes from.

A proxy sees only its caller's address ("ipv4:127.0.0.1:54321"). While that
TCP connection is open, Linux names its socket in /proc/net/tcp (local
address, remote address, inode), and the process holding the socket has a
/proc/PID/fd link to "socket:[INODE]". So a proxy call is tied to the driver
whose process, or a process it started (a forked child, the JVM under a
wrapper script), holds that socket: the runner can then tell which client a
range was issued to and which client returned it (scenario.py checks that a
client hands out only numbers of its own ranges, and that no return gives
back a number the client handed out).

Thread-safe: proxies call `client_of` from their handler threads.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Dict, Optional

from processes import children_by_parent

# /proc/net/tcp's state of an established connection.
_ESTABLISHED = "01"


def _hex_address(host: str, port: int) -> str:
    """127.0.0.1:54321 as /proc/net/tcp writes it: 0100007F:D431."""
    parts = [int(p) for p in host.split(".")]
    value = parts[0] | parts[1] << 8 | parts[2] << 16 | parts[3] << 24
    return f"{value:08X}:{port:04X}"


def _socket_inode(peer: str, server_port: int) -> Optional[str]:
    """The inode of the client's end of the connection from `peer` to
    127.0.0.1:server_port, or None if it is not (or no longer) open."""
    if not peer.startswith("ipv4:"):
        return None
    host, _, port = peer[len("ipv4:"):].rpartition(":")
    try:
        local = _hex_address(host, int(port))
    except ValueError:
        return None
    remote = _hex_address("127.0.0.1", server_port)
    # gRPC's C core connects through an IPv6 socket when it can: the
    # client's end is then in tcp6, as the IPv4-mapped ::ffff:127.0.0.1.
    mapped = "0000000000000000FFFF0000"
    for table, lo, re in (("/proc/net/tcp", local, remote),
                          ("/proc/net/tcp6", mapped + local,
                           mapped + remote)):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if (fields[1] == lo and fields[2] == re and
                            fields[3] == _ESTABLISHED):
                        return fields[9]
        except OSError:
            continue
    return None


def _holds(pid: int, link: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == link:
                return True
        except OSError:
            continue
    return False


class Peers:
    """Maps a proxy's caller to the name of the driver it belongs to."""

    def __init__(self, drivers: Callable[[], Dict[str, int]]):
        self._drivers = drivers  # name -> pid, read at each lookup
        self._lock = threading.Lock()
        self._by_inode: Dict[str, Optional[str]] = {}

    def client_of(self, peer: str, server_port: int) -> Optional[str]:
        """The driver's name, or None when the socket cannot be found (the
        connection already closed) or belongs to no driver."""
        inode = _socket_inode(peer, server_port)
        if inode is None:
            return None
        with self._lock:
            if inode in self._by_inode:
                return self._by_inode[inode]
        link = f"socket:[{inode}]"
        found = None
        children = None
        for name, pid in self._drivers().items():
            tree, k = [pid], 0
            while k < len(tree) and found is None:
                if _holds(tree[k], link):
                    found = name
                    break
                if children is None:
                    children = children_by_parent()
                tree.extend(children.get(tree[k], []))
                k += 1
            if found is not None:
                break
        with self._lock:
            self._by_inode[inode] = found
        return found
