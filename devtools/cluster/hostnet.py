"""What a node changes on the host, and how each change is undone: its own network interface, sysctls,
iptables chains, mounts, cgroups, network namespaces and processes.

Every function here touches only what the node made: two bridges with our own names, KUBE-*
chains (which only kubelet and kube-proxy create), mounts below the node's state folder, the `kubepods` cgroups,
network namespaces that appeared during the run, processes inside those cgroups or started against the node's
own containerd socket. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

#: sysctls kubelet, kube-proxy and the CNI bridge plugin set; their values before the start are put back
SYSCTLS = (
    "net/ipv4/ip_forward", "net/ipv4/conf/all/route_localnet", "vm/overcommit_memory", "vm/panic_on_oom",
    "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
    "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
)
_CGROUPS = Path("/sys/fs/cgroup")
_NETNS = Path("/run/netns")
_CHAIN_PREFIXES = ("KUBE-",)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


# -- sysctls -----------------------------------------------------------------------------------------
def read_sysctls() -> dict[str, str]:
    values = {}
    for key in SYSCTLS:
        with contextlib.suppress(OSError):
            values[key] = (Path("/proc/sys") / key).read_text().strip()
    return values


def restore_sysctls(values: dict[str, str]) -> None:
    for key, value in values.items():
        with contextlib.suppress(OSError):
            path = Path("/proc/sys") / key
            if path.read_text().strip() != value:
                path.write_text(value)


# -- interfaces --------------------------------------------------------------------------------------
def add_address_link(name: str, address: str) -> None:
    """The node's own address: kubelet needs one that is not loopback, the API server listens on it. The link
    is a bridge without ports (every kernel with CNI's bridge has bridges; not every one has `dummy`)."""
    delete_link(name)
    _ip("link", "add", name, "type", "bridge")
    _ip("addr", "add", f"{address}/32", "dev", name)
    _ip("link", "set", name, "up")


def delete_link(name: str) -> None:
    if _ip("link", "show", name, check=False).returncode == 0:
        _ip("link", "delete", name)


def link_exists(name: str) -> bool:
    return _ip("link", "show", name, check=False).returncode == 0


# -- network namespaces ------------------------------------------------------------------------------
def netns_names() -> set[str]:
    return {p.name for p in _NETNS.iterdir()} if _NETNS.is_dir() else set()


def delete_new_netns(before: list[str]) -> None:
    """Pod sandboxes' namespaces containerd left (normally CNI DEL removed them with the sandbox)."""
    for name in sorted(netns_names() - set(before)):
        if name.startswith("cni-"):
            _ip("netns", "delete", name, check=False)


# -- iptables ----------------------------------------------------------------------------------------
def parse_save(text: str) -> tuple[list[tuple[str, str]], list[tuple[str, list[str]]]]:
    """From `iptables-save` output: our chains as (table, chain), and the rules of other chains that jump into
    ours as (table, the rule's arguments for `-D`). Pure, so that what would be deleted can be tested."""
    table, chains, jumps = "", [], []
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":") and line[1:].split()[0].startswith(_CHAIN_PREFIXES):
            chains.append((table, line[1:].split()[0]))
        elif line.startswith("-A ") and not line.split()[1].startswith(_CHAIN_PREFIXES):
            rule = shlex.split(line)[1:]
            targets = [rule[i + 1] for i, arg in enumerate(rule[:-1]) if arg in ("-j", "-g")]
            if any(t.startswith(_CHAIN_PREFIXES) for t in targets):
                jumps.append((table, rule))
    return chains, jumps


def _save(tool: str) -> str:
    return subprocess.run([f"{tool}-save"], capture_output=True, text=True, check=False).stdout


def our_chains() -> dict[str, list[str]]:
    """`{"iptables:nat": ["KUBE-SERVICES", ...], ...}`: the chains kubelet and kube-proxy created."""
    found: dict[str, list[str]] = {}
    for tool in ("iptables", "ip6tables"):
        for table, chain in parse_save(_save(tool))[0]:
            found.setdefault(f"{tool}:{table}", []).append(chain)
    return found


def delete_chains() -> None:
    """Remove the jumps into our chains from the built-in ones, then flush and delete our chains."""
    for tool in ("iptables", "ip6tables"):
        chains, jumps = parse_save(_save(tool))
        for table, rule in jumps:
            subprocess.run([tool, "-w", "-t", table, "-D", *rule], capture_output=True, check=False)
        for verb in ("-F", "-X"):
            for table, chain in chains:
                subprocess.run([tool, "-w", "-t", table, verb, chain], capture_output=True, check=False)


# -- cgroups and processes ---------------------------------------------------------------------------
def kubepods_cgroups() -> list[Path]:
    return sorted(p for p in _CGROUPS.glob("*/kubepods*") if p.is_dir())


def kill_pods_processes() -> None:
    """Every process still inside a Pod's cgroup: only containers of this node live there."""
    for root in kubepods_cgroups():
        for procs in root.rglob("cgroup.procs"):
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)


def remove_cgroups() -> None:
    """rmdir bottom-up: a cgroup folder goes once its children and processes are gone."""
    deadline = time.monotonic() + 20
    while kubepods_cgroups() and time.monotonic() < deadline:
        kill_pods_processes()
        for root in kubepods_cgroups():
            for folder in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            with contextlib.suppress(OSError):
                root.rmdir()
        time.sleep(0.2)


def processes_using(marker: str) -> list[int]:
    """Pids whose command line contains `marker` (a path only this node uses, e.g. its containerd socket)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
    return pids


def kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# -- mounts ------------------------------------------------------------------------------------------
def mounts_under(folder: Path) -> list[str]:
    prefix = str(folder.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return points


def unmount_under(folder: Path) -> None:
    """Deepest first; lazily, so a mount still busy for a moment does not keep the folder forever."""
    for _ in range(5):
        points = mounts_under(folder)
        if not points:
            return
        for point in sorted(set(points), key=lambda p: -len(p)):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
