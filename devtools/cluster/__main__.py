"""`python -m devtools.cluster up|down|build|status`: the local control plane by hand (see `make cluster-up`).

`up` and `down` work in either order and after a crash halfway: `up --node` over a control plane without a node
replaces it (the node needs its API server on the node's address), a failed `up` stops whatever it started, and
`down` stops the processes `state.json`/`node.json` record plus any control-plane or node binary still running
from the state folder (a start interrupted before it recorded a pid), then says if anything is left.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from devtools.cluster import build, controlplane, hostnet, node, versions

DEFAULT_STATE = Path(".cluster")
#: the programs a start runs from the state folder (containerd's shims name its socket there)
_OUR_PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager", "kubelet", "kube-scheduler", "kube-proxy",
                 "containerd", "containerd-shim", "containerd-shim-runc-v2")


def running(state: Path) -> controlplane.ControlPlane | None:
    """The control plane `make cluster-up` left running in `state`, if it is still alive and ready."""
    if not (state / "state.json").exists():
        return None
    plane = controlplane.ControlPlane.load(state)
    if Path(plane.binaries.get("kube-apiserver", "")).parent != versions.bin_dir():
        return None  # another Kubernetes version than the one selected: not the plane asked for
    return plane if plane.is_alive() and plane.is_ready() else None


def running_node(state: Path) -> node.Node | None:
    """The node `make node-up` left running in `state/node`, if it is alive."""
    folder = state / "node"
    if not (folder / "node.json").exists():
        return None
    found = node.Node.load(folder)
    return found if found.is_alive() else None


def up(state: Path, *, with_node: bool = False) -> int:
    state = state.resolve()
    kubeconfig = state / "kubeconfig"
    if running(state) and (running_node(state) or not with_node):
        print(f"a control plane is already running from {state}; reusing it", file=sys.stderr)
    else:
        if running(state):
            print(f"a control plane without a node runs from {state}: stopping it to start one with a node",
                  file=sys.stderr)
        if (state / "state.json").exists() or strays(state):
            down(state)  # a dead or half-dead one (or one without the node asked for): clear it first
        started = time.monotonic()
        try:
            if with_node:
                plane, _ = node.start_with_plane(state, die_with_parent=False)
            else:
                plane = controlplane.start(state, die_with_parent=False)
        except BaseException:
            kill_strays(state)
            print(f"the start failed and left nothing running; its logs are in {state}/ (`make cluster-down` "
                  f"removes them)", file=sys.stderr)
            raise
        shutil.copy(plane.admin_kubeconfig, kubeconfig)
        what = f"control plane and node {node.NODE_NAME}" if with_node else "control plane"
        print(f"{what} ready at {plane.server} in {time.monotonic() - started:.1f}s", file=sys.stderr)
    print(f"export KUBECONFIG={kubeconfig}")
    return 0


def strays(state: Path) -> list[int]:
    """Pids of control-plane or node programs running from `state`, whether or not a state file records them."""
    found = []
    for pid in hostnet.processes_using(f"{state.resolve()}/"):
        try:
            program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if Path(program).name in _OUR_PROGRAMS:
            found.append(pid)
    return found


def kill_strays(state: Path, *, grace: float = 10.0) -> None:
    for pid in strays(state):
        controlplane._terminate(pid, grace=grace)


def down(state: Path) -> int:
    state = state.resolve()
    plane = controlplane.ControlPlane.load(state) if (state / "state.json").exists() else None
    if plane is None and not (state / "node" / "node.json").exists() and not strays(state):
        print(f"no control plane state in {state}; nothing to stop", file=sys.stderr)
        return 0
    if (state / "node" / "node.json").exists():
        stopped = node.Node.load(state / "node")
        stopped.stop(plane)
        for item in stopped.leftovers():
            print(f"left behind: {item}", file=sys.stderr)
    if plane is not None:
        plane.stop(remove_state=False)
    kill_strays(state)
    left = strays(state)
    if left:
        print(f"left behind: processes {left} (still running from {state}; kept for you to look at)", file=sys.stderr)
        return 1
    shutil.rmtree(state, ignore_errors=True)
    print("control plane stopped and its state removed", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.cluster", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "build", "status"])
    parser.add_argument("--node", action="store_true", help="with `up`/`build`: a real node too (root)")
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE, help="state folder (default: .cluster)")
    args = parser.parse_args(argv)
    if args.command == "build":
        return build.main(["--node"] if args.node else [])
    if args.command == "up":
        return up(args.state, with_node=args.node)
    if args.command == "down":
        return down(args.state)
    plane = running(args.state)
    print(f"running at {plane.server}" if plane else "not running")
    return 0 if plane else 1


if __name__ == "__main__":
    raise SystemExit(main())
