"""What Linux's /proc tells of processes: whether a PID is alive, and still the process it was (its start time, so
that a PID the kernel reused never counts as the process collected before), and the sockets processes listen on
(to check that a cluster binds only loopback addresses)."""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Iterable


def listening_sockets(pids: Iterable[int]) -> list[tuple[str, int, int]]:
    """``(address, port, pid)`` of every listening TCP socket and unconnected UDP socket of those processes.

    Read from /proc (the processes' file descriptors, then /proc/<pid>/net/{tcp,tcp6,udp,udp6}); processes that
    end meanwhile, or that are not readable, are skipped. Addresses are as :mod:`ipaddress` writes them, e.g.
    ``127.0.0.1``, ``::ffff:127.0.0.1`` (an IPv6 socket bound to IPv4 loopback), ``0.0.0.0`` or ``::``.
    """
    owners: dict[int, int] = {}  # socket inode -> pid
    tables: dict[str, dict[int, tuple[str, int]]] = {}  # network namespace -> inode -> (address, port)
    for pid in pids:
        try:
            inodes = [_socket_inode(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            namespace = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        owners.update((inode, pid) for inode in inodes if inode is not None)
        if namespace not in tables:
            tables[namespace] = _listening_table(pid)
    found: set[tuple[str, int, int]] = set()
    for table in tables.values():
        for inode, (address, port) in table.items():
            if inode in owners:
                found.add((address, port, owners[inode]))
    return sorted(found)


def is_loopback(address: str) -> bool:
    """Whether ``address`` (as :func:`listening_sockets` gives it) is loopback: 127.0.0.0/8, ::1, ::ffff:127.x."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists and is not a zombie."""
    return start_time(pid) is not None


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, session, ...), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks after boot), None if there is none or it is a zombie."""
    fields = proc_stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def same_process(pid: int, started: int | None) -> bool:
    """Whether ``pid`` is alive and still the process that started at ``started`` (any process if None)."""
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def _socket_inode(link: str) -> int | None:
    try:
        target = os.readlink(link)
    except OSError:
        return None
    return int(target[8:-1]) if target.startswith("socket:[") else None


def _listening_table(pid: int) -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of the listening TCP and unconnected UDP sockets in ``pid``'s network namespace."""
    table = {}
    for name, listening in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        try:
            with open(f"/proc/{pid}/net/{name}") as file:
                rows = file.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], int(fields[9])
            if state != listening or (name.startswith("udp") and int(remote.split(":")[1], 16) != 0):
                continue
            address, port = local.split(":")
            table[inode] = (_proc_net_address(address), int(port, 16))
    return table


def _proc_net_address(text: str) -> str:
    """An address as /proc/net/tcp* writes it: 32-bit words in hexadecimal, each in the machine's byte order."""
    raw = bytes.fromhex(text)
    if sys.byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(raw)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return f"::ffff:{mapped}" if mapped is not None else str(ip)  # as Python 3.13 and ss write it
