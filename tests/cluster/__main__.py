"""`python -m tests.cluster up|down|build|status`: the local control plane by hand (see `make cluster-up`)."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from tests.cluster import build, controlplane, node

DEFAULT_STATE = Path(".cluster")


def running(state: Path) -> controlplane.ControlPlane | None:
    """The control plane `make cluster-up` left running in `state`, if it is still alive and ready."""
    if not (state / "state.json").exists():
        return None
    plane = controlplane.ControlPlane.load(state)
    return plane if plane.is_alive() and plane.is_ready() else None


def running_node(state: Path) -> node.Node | None:
    """The node `make node-up` left running in `state/node`, if it is alive."""
    folder = state / "node"
    if not (folder / "node.json").exists():
        return None
    found = node.Node.load(folder)
    return found if found.is_alive() else None


def up(state: Path, *, with_node: bool = False) -> int:
    kubeconfig = state / "kubeconfig"
    if running(state) and (running_node(state) or not with_node):
        print(f"a control plane is already running from {state}; reusing it", file=sys.stderr)
    else:
        if (state / "state.json").exists():
            down(state)  # a dead or half-dead one (or one without the node asked for): clear it first
        started = time.monotonic()
        if with_node:
            plane, _ = node.start_with_plane(state.resolve(), die_with_parent=False)
        else:
            plane = controlplane.start(state.resolve(), die_with_parent=False)
        shutil.copy(plane.admin_kubeconfig, kubeconfig)
        what = f"control plane and node {node.NODE_NAME}" if with_node else "control plane"
        print(f"{what} ready at {plane.server} in {time.monotonic() - started:.1f}s", file=sys.stderr)
    print(f"export KUBECONFIG={kubeconfig.resolve()}")
    return 0


def down(state: Path) -> int:
    if not (state / "state.json").exists():
        print(f"no control plane state in {state}; nothing to stop", file=sys.stderr)
        return 0
    plane = controlplane.ControlPlane.load(state)
    if (state / "node" / "node.json").exists():
        stopped = node.Node.load(state / "node")
        stopped.stop(plane)
        for item in stopped.leftovers():
            print(f"left behind: {item}", file=sys.stderr)
    plane.stop()
    shutil.rmtree(state, ignore_errors=True)
    print("control plane stopped and its state removed", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster", description=__doc__)
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
