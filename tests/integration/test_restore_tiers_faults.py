"""SIGKILL mid-restore across restore tiers, a real process against a real API server: no record is ever lost,
no tier comes back before the one it waits for, and the next runs converge.

Each namespace restores in three tiers: a StatefulSet `db` (tier 0: the policy's `restore_order`), a Deployment
`app` (tier 1: a kind not listed) and a Deployment `web` (tier 2: its `restore-tier` annotation). No kubelet runs
here, so nothing ever becomes available: every tier after the first is released by `restore_wait` ("1s")
counted from the API server's stamp of nsscaler's restore of the tier before it, and one run goes through the
three tiers with its in-run wait (2 s polls). That is real time passing, a lower bound, never a race: the kills
land at a restore PATCH the fault proxy counts, whatever the machine's speed.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster.controlplane import ControlPlane
from job.model.marks import (
    ANNOTATION_ORIGINAL_REPLICAS,
    ANNOTATION_RESTORE_TIER,
    ANNOTATION_SCALED_BY,
    FIELD_MANAGER,
    LABEL_SCALED,
)
from tests.faults import FaultProxy, KillAt
from tests.integration.test_faults import NSSCALER, fault_seed

pytestmark = pytest.mark.usefixtures("crd")

FROZEN, RESTORED = "frozen", "restored"
NAMESPACES = 5
KILLS = 20
#: the policy's restore_wait: what releases every tier after the first, nothing being ever available here
RESTORE_WAIT = dt.timedelta(seconds=1)
#: the most unkilled runs a convergence may take (one run, with its in-run wait, does all three tiers)
MAX_RUNS = 5


@dataclass(frozen=True)
class Tiered:
    kind: str
    name: str
    replicas: int
    annotations: tuple[tuple[str, str], ...] = ()


#: every namespace's workloads, tier by tier: db (0, by restore_order), app (1, not listed), web (2, annotated)
WORKLOADS = (
    Tiered("StatefulSet", "db", 1),
    Tiered("Deployment", "app", 2),
    Tiered("Deployment", "web", 3, ((ANNOTATION_RESTORE_TIER, "2"),)),
)
ORIGINALS = {w.name: w.replicas for w in WORKLOADS}
#: the restore PATCHes of one whole restore: every workload of every namespace, once
RESTORE_PATCHES = NAMESPACES * len(WORKLOADS)

State = dict[tuple[str, str], str]


def make_family(api: AdminApi, family: str) -> None:
    for i in range(NAMESPACES):
        ns = f"{family}{i}"
        api.create(builders.namespace(ns))
        for w in WORKLOADS:
            if w.kind == "StatefulSet":
                api.create(builders.statefulset(ns, w.name, w.replicas))
            else:
                api.create(builders.deployment(ns, w.name, w.replicas, annotations=dict(w.annotations)))


def family_objects(api: AdminApi, family: str) -> list[dict[str, Any]]:
    return [obj for kind in sorted({w.kind for w in WORKLOADS}) for obj in api.list(kind)
            if obj["metadata"]["namespace"].startswith(family)]


def state_of(obj: dict[str, Any], policy: str) -> str:
    """FROZEN (at 0 with its exact record), RESTORED (at its pre-freeze count, no record, no label), or what
    else it is: anything else is a lost or a wrong count."""
    meta = obj["metadata"]
    original = ORIGINALS[meta["name"]]
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    replicas = obj["spec"]["replicas"]
    record = (annotations.get(ANNOTATION_ORIGINAL_REPLICAS), annotations.get(ANNOTATION_SCALED_BY),
              labels.get(LABEL_SCALED))
    if replicas == 0 and record == (str(original), policy, "true"):
        return FROZEN
    if replicas == original and record == (None, None, None):
        return RESTORED
    return f"replicas {replicas}, record {record} (pre-freeze {original})"


def states(api: AdminApi, family: str, policy: str) -> State:
    return {(obj["metadata"]["namespace"], obj["metadata"]["name"]): state_of(obj, policy)
            for obj in family_objects(api, family)}


def everything(family: str, state: str) -> State:
    return {(f"{family}{i}", w.name): state for i in range(NAMESPACES) for w in WORKLOADS}


def assert_nothing_lost(found: State, family: str, where: str) -> None:
    assert set(found) == set(everything(family, FROZEN)), f"{where}: workloads {sorted(found)}"
    broken = {key: state for key, state in found.items() if state not in (FROZEN, RESTORED)}
    assert not broken, f"{where}: lost or wrong records: {broken}"


def assert_tier_order(found: State, family: str, where: str) -> None:
    """In every namespace, a workload is back only if every workload of the tiers before it is back."""
    broken = []
    for i in range(NAMESPACES):
        ns = f"{family}{i}"
        for earlier, later in itertools.pairwise(WORKLOADS):
            if found[(ns, later.name)] == RESTORED and found[(ns, earlier.name)] != RESTORED:
                broken.append(f"{ns}: {later.name} back, {earlier.name} {found[(ns, earlier.name)]}")
    assert not broken, f"{where}: a tier came back before the one it waits for: {broken}"


def restore_stamp(obj: dict[str, Any]) -> dt.datetime:
    """The API server's stamp of nsscaler's last write of the object (its restore, once it is back)."""
    times = [e["time"] for e in obj["metadata"].get("managedFields") or ()
             if e.get("manager") == FIELD_MANAGER and not e.get("subresource") and e.get("time")]
    assert times, f"{obj['metadata']['namespace']}/{obj['metadata']['name']}: no write of {FIELD_MANAGER}"
    return dt.datetime.fromisoformat(max(times))


def assert_tiers_waited(api: AdminApi, family: str, where: str) -> None:
    """Nothing being available, each tier came back at least restore_wait after the one before it, by the API
    server's own stamps (second-grained: a real gap of 1 s or more is a gap of 1 s or more between stamps)."""
    stamps = {(obj["metadata"]["namespace"], obj["metadata"]["name"]): restore_stamp(obj)
              for obj in family_objects(api, family)}
    early = []
    for i in range(NAMESPACES):
        ns = f"{family}{i}"
        for earlier, later in itertools.pairwise(WORKLOADS):
            gap = stamps[(ns, later.name)] - stamps[(ns, earlier.name)]
            if gap < RESTORE_WAIT:
                early.append(f"{ns}: {later.name} {gap.total_seconds():+.0f}s after {earlier.name}")
    assert not early, f"{where}: a tier came back before restore_wait: {early}"


def run(cmd: list[str], where: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{where}: exit {done.returncode}\n{done.stderr}"


def converge(api: AdminApi, cmd: list[str], family: str, policy: str, where: str) -> int:
    """Unkilled runs until no record is left; returns how many it took."""
    for runs in range(1, MAX_RUNS + 1):
        run(cmd, f"run {runs} after {where}")
        found = states(api, family, policy)
        assert_nothing_lost(found, family, f"run {runs} after {where}")
        assert_tier_order(found, family, f"run {runs} after {where}")
        if found == everything(family, RESTORED):
            return runs
    raise AssertionError(f"{where}: records left after {MAX_RUNS} runs: {states(api, family, policy)}")


@pytest.mark.slow
def test_sigkill_mid_restore_across_tiers_loses_nothing(api: AdminApi, control_plane: ControlPlane, prefix: str,
                                                        admin_token: str, tmp_path: Path) -> None:
    """20 SIGKILLs, each at one of a whole restore's 15 workload PATCHes drawn at random (seeded, the seed
    printed; whether the killed PATCH still reaches the API server drawn too), so the kills fall in every tier,
    at its first and its last PATCH too: the restore is cut between any two of its writes. After each: every
    workload is frozen with its exact record or back exactly, exactly as many are back as the kill let through,
    no tier is back before the one it waits for, and the next unkilled runs bring everything back, each tier
    restore_wait after the one before it."""
    started = time.monotonic()
    family, policy = prefix + "n", f"{prefix}p"
    make_family(api, family)
    api.create(builders.nsscaler(policy, family, [], restore_order=["StatefulSet"],
                                 restore_wait=f"{RESTORE_WAIT.seconds}s"))
    # One worker: the PATCHes go one after the other, so a kill lands at exactly the drawn one, the last
    # included (with two, the last PATCH may leave while the one before it is in flight: never killed).
    cmd = [NSSCALER, "--kubeconfig", str(control_plane.admin_kubeconfig), "--concurrency", "1",
           "--log-level", "error", "--restore-wait-in-run", "60"]
    seed = fault_seed()
    rng = random.Random(seed)
    kills: list[tuple[int, bool, int]] = []
    runs: Counter[int] = Counter()
    with FaultProxy(control_plane, fraction=0.0) as proxy:
        proxied = [*cmd[:1], "--kubeconfig", str(proxy.kubeconfig(tmp_path / "kill", admin_token)), *cmd[3:]]
        for attempt in range(KILLS):
            # the scene: the policy holds the whole family, frozen with its records
            api.patch("NSScaler", policy, {"spec": {"active_namespace_suffixes": []}})
            run(cmd, f"the freeze before kill {attempt}")
            assert states(api, family, policy) == everything(family, FROZEN), f"the freeze before kill {attempt}"
            # the release: every namespace active again, the policy (and its restore_order) still there
            api.patch("NSScaler", policy, {"spec": {"active_namespace_suffixes": [str(i) for i in range(NAMESPACES)]}})
            n, lands = rng.randint(1, RESTORE_PATCHES), rng.random() < 0.5
            where = f"kill {attempt} at restore PATCH {n} (lands: {lands}; FAULT_SEED={seed})"
            # workload PATCHes go to the apps group's namespaced paths; the NSScaler's status PATCH (cluster-scoped)
            # and the hold's marks (PATCHes of the Namespaces themselves, /api/v1/namespaces/<ns>) do not
            kill = KillAt(method="PATCH", path_part="/apis/apps/v1/namespaces/", n=n, lands=lands).on(proxy)
            kill.start(proxied)
            assert kill.wait() == -signal.SIGKILL and kill.killed.is_set(), f"{where}: the run ended first"
            proxy.wait_idle()
            found = states(api, family, policy)
            assert_nothing_lost(found, family, where)
            assert_tier_order(found, family, where)
            back = sum(1 for state in found.values() if state == RESTORED)
            # n-1 PATCHes had succeeded, and the killed one restored a workload too if it landed (and met no 409)
            assert back in ((n - 1, n) if lands else (n - 1,)), f"{where}: {back} of {RESTORE_PATCHES} back"
            runs[converge(api, cmd, family, policy, where)] += 1
            assert_tiers_waited(api, family, where)
            kills.append((n, lands, back))
    assert states(api, family, policy) == everything(family, RESTORED)
    landed = " ".join(f"{n}{'+' if lands else '-'}{back}" for n, lands, back in kills)
    print(f"{KILLS} SIGKILLs mid-restore across 3 tiers, at restore PATCH n (+ landed, - reset) and workloads back "
          f"after it: {landed}; runs to converge: {dict(sorted(runs.items()))}; nothing lost, no tier early "
          f"({time.monotonic() - started:.0f}s, FAULT_SEED={seed})")
