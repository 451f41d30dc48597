"""What a running server holds, read from /proc: descriptors, resident memory, CPU time.

Also the loopback helpers that let one test open more connections than one source address has
ports for, and the check for error-level lines in the server's log. Shared by the fault tests
and the soak run.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Linux: choose the source port at connect time (per destination), not at bind time, so many
# sockets bound to one source address do not compete for a single pool of ports.
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
# swift-log's StreamLogHandler writes "<timestamp> <level> <label> :<metadata> <message>".
ERROR_LINE = re.compile(r"^\S+ (error|critical) ")


def fd_count(pid: int) -> int:
    """Open descriptors of the process."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def socket_count(pid: int) -> int:
    """Open descriptors of the process that are sockets."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                count += 1
        except FileNotFoundError:
            pass  # closed while we looked
    return count


def rss_bytes(pid: int) -> int:
    """Resident memory (VmRSS) of the process."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name may hold spaces; the fields after it are fixed (utime 14, stime 15).
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_share(pid: int, window: float) -> float:
    """The share of one core the process used over the next `window` seconds."""
    cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
    time.sleep(window)  # a measurement window, not synchronisation
    return (cpu_seconds(pid) - cpu_before) / (time.monotonic() - wall_before)


def wait_fd_count(pid: int, expected, timeout: float, what: str = "descriptors") -> int:
    """Poll until `expected(count)` holds for the process's descriptor count; returns the count."""
    deadline = time.monotonic() + timeout
    while True:
        count = fd_count(pid)
        if expected(count):
            return count
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still {count} open after {timeout}s")
        time.sleep(0.02)


def steady_fd_count(pid: int, quiet: float = 0.3, timeout: float = 10.0) -> int:
    """The descriptor count once it has not changed for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    count, since = fd_count(pid), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise AssertionError(f"descriptor count kept changing for {timeout}s (now {count})")
        time.sleep(0.02)
        now = fd_count(pid)
        if now != count:
            count, since = now, time.monotonic()
    return count


def source_addresses(count: int) -> list[str]:
    """Loopback source addresses 127.0.0.2, 127.0.0.3 …: each has its own range of ports."""
    return [f"127.0.0.{2 + i}" for i in range(count)]


def connect_from(source: str, host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection from a chosen loopback source address."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        sock.bind((source, 0))
        sock.settimeout(timeout)
        sock.connect((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def reset_close(sock: socket.socket) -> None:
    """Close with a TCP reset instead of a FIN (SO_LINGER with a zero timeout)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def error_lines(log: str) -> list[str]:
    """The error- and critical-level lines of the server's log."""
    return [line for line in log.splitlines() if ERROR_LINE.match(line)]
