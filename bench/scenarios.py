"""The measured scenarios. Each returns raw results, one dict per measured run, tagged (n, scenario, tool).

- all-family (N namespaces `bench-nXXXXX`, 5 Deployments each, one policy allowing 20 %): first run (freeze
  80 %), steady state (nothing to do), restore run (the allowed 20 % moves); nsscaler, the peer, naive, limit;
- family: a small family `family-` inside the big cluster; nsscaler's first run and steady state next to
  one cluster-wide paginated LIST of the kinds its policy freezes (Deployments, StatefulSets);
- memory: nsscaler's first run over a large family, one repetition, for its peak RSS.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pykube

from bench import baselines, cluster, limit, peer, runs, summary
from devtools.builders import AdminApi
from devtools.cluster.controlplane import ControlPlane
from job.model.kinds.registry import BUILTIN
from job.model.marks import ANNOTATION_FREED, DOMAIN, SCALED_SELECTOR
from job.model.settings import Settings

PREFIX = "bench-"
POLICY = "bench"
FAMILY_PREFIX = "family-"
FAMILY_POLICY = "family"
#: nsscaler's page size, so the reference LIST costs what nsscaler's own cluster-wide LIST would
PAGE = 500


@dataclass
class Bench:
    """What every scenario needs: the control plane, two clients, the options."""

    plane: ControlPlane
    api: AdminApi
    client: pykube.HTTPClient
    reps: int
    peer: Path | None
    compare_max: int

    @property
    def kubeconfig(self) -> Path:
        return self.plane.admin_kubeconfig

    def held(self, prefix: str, active: list[str]) -> Callable[[str], bool]:
        keep = {prefix + s for s in active}
        return lambda ns: ns not in keep


_STARTED = time.monotonic()


def say(text: str) -> None:
    """Progress on stderr, with the minutes since the bench started (a full `make bench` takes ~40)."""
    elapsed = int(time.monotonic() - _STARTED)
    print(f"[{elapsed // 60:02d}:{elapsed % 60:02d}] {text}", file=sys.stderr, flush=True)


@dataclass
class Recorder:
    """Measures runs at one N and keeps them; after each run of the first repetition it checks the cluster
    state (outside the measured window), so a tool that did a different job fails the bench."""

    b: Bench
    n: int
    rep: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)

    def add(self, scenario: str, tool: str, run: Callable[[], dict[str, Any]], active: list[str]) -> None:
        result = runs.measured(self.b.plane, run)
        self.results.append({"n": self.n, "scenario": scenario, "tool": tool, **result})
        if self.rep == 0:
            runs.check_job_done(self.b.client, tool=tool, prefix=PREFIX, held=self.b.held(PREFIX, active))


def all_family(b: Bench, n: int) -> list[dict[str, Any]]:
    """Every tool, every scenario it can do, --reps times."""
    first, second = cluster.allowed(n, 0), cluster.allowed(n, 1)
    everyone = [cluster.suffix(i) for i in range(n)]
    rec = Recorder(b, n)
    for rep in range(b.reps):
        rec.rep = rep
        say(f"  N={n} rep {rep + 1}/{b.reps}: nsscaler")
        nsscaler = functools.partial(runs.run_nsscaler, b.kubeconfig)
        for scenario, active in (("first run", first), ("steady state", first), ("restore run", second)):
            cluster.set_policy(b.api, POLICY, prefix=PREFIX, active=active)
            rec.add(scenario, "nsscaler", nsscaler, active)
            if scenario == "first run":
                rec.results[-1]["record"] = record_cost(b.client, prefix=PREFIX)
            if scenario == "steady state":  # once more, unmeasured: what it imports, under -X importtime
                rec.results[-1]["imports"] = runs.import_times(b.kubeconfig)
        cluster.set_policy(b.api, POLICY, prefix=PREFIX, active=None)
        nsscaler()  # back to all running, unmeasured

        if b.peer:
            say(f"  N={n} rep {rep + 1}/{b.reps}: kube-downscaler")
            run_peer = functools.partial(peer.run, b.peer, b.kubeconfig, prefix=PREFIX,
                                         allowed_namespaces=[PREFIX + s for s in first])
            rec.add("first run", summary.PEER, run_peer, first)
            rec.add("steady state", summary.PEER, run_peer, first)
            peer.restore_all(b.client)
        if n > b.compare_max:
            continue
        say(f"  N={n} rep {rep + 1}/{b.reps}: naive")
        for scenario, active in (("first run", first), ("steady state", first), ("restore run", second)):
            rec.add(scenario, "naive", functools.partial(baselines.naive, b.client, prefix=PREFIX,
                                                         active=set(active), policy=POLICY), active)
        baselines.naive(b.client, prefix=PREFIX, active=set(everyone), policy=POLICY)

        say(f"  N={n} rep {rep + 1}/{b.reps}: limit")
        for scenario, active in (("first run", first), ("steady state", first), ("restore run", second)):
            patches = baselines.planned_patches(b.client, prefix=PREFIX, active=set(active), policy=POLICY)
            rec.add(scenario, "limit", functools.partial(limit.in_own_process, b.kubeconfig, patches,
                                                         concurrency=runs.CONCURRENCY), active)
        patches = baselines.planned_patches(b.client, prefix=PREFIX, active=set(everyone), policy=POLICY)
        limit.send_unmeasured(b.kubeconfig, patches, concurrency=runs.CONCURRENCY)  # all running again
    return rec.results


def record_cost(client: pykube.HTTPClient, *, prefix: str) -> dict[str, Any]:
    """What nsscaler's record adds to a frozen Deployment of the family, in bytes of JSON as a freeze's merge
    PATCH carries it (key and value of each annotation and label it writes): all of it, and the freed-capacity
    record (`ANNOTATION_FREED`) alone. Read from one frozen Deployment, outside the measured window."""
    resp = client.get(version="apps/v1", url="deployments", params={"labelSelector": SCALED_SELECTOR, "limit": 50})
    resp.raise_for_status()
    frozen = [d for d in resp.json()["items"] if d["metadata"]["namespace"].startswith(prefix)]
    if not frozen:
        return {}
    meta = frozen[0]["metadata"]
    ours = {k: v for k, v in {**meta.get("annotations", {}), **meta.get("labels", {})}.items()
            if k.startswith(DOMAIN + "/")}
    freed = {k: v for k, v in ours.items() if k == ANNOTATION_FREED}
    return {"record_bytes": len(json.dumps(ours, separators=(",", ":"))),
            "freed_bytes": len(json.dumps(freed, separators=(",", ":"))) if freed else 0,
            "freed_value": next(iter(freed.values()), None)}


def peer_restores_excluded(b: Bench, n: int) -> dict[str, Any]:
    """Does the peer restore Deployments whose namespace becomes excluded (the restore run's job)? One
    unmeasured try: freeze with the first allowed set, run again with the second, count the Deployments of
    the newly allowed namespaces still at 0."""
    assert b.peer
    first, second = cluster.allowed(n, 0), cluster.allowed(n, 1)
    for active in (first, second):
        peer.run(b.peer, b.kubeconfig, prefix=PREFIX, allowed_namespaces=[PREFIX + s for s in active])
    newly_allowed = {PREFIX + s for s in second}
    wrong = runs.wrong_replicas(b.client, prefix=PREFIX, held=b.held(PREFIX, second))
    still_down = [w for w in wrong if w.split("/")[0] in newly_allowed]
    peer.restore_all(b.client)
    return {"n": n, "newly_allowed_deployments": len(newly_allowed) * cluster.PER_NAMESPACE,
            "still_at_zero": len(still_down), "restores": not still_down}


#: what the family's policy reads: the kinds a policy freezes when it leaves spec.kinds out (the default_kinds
#: setting, as the bench runs nsscaler), as (API version, resource)
FAMILY_KINDS = tuple((BUILTIN[k].api_version, BUILTIN[k].plural)
                     for k in Settings.model_fields["default_kinds"].default)


def cluster_wide_list(client: pykube.HTTPClient) -> dict[str, Any]:
    """One paginated LIST, cluster-wide, of every object of the kinds the family's policy freezes, nsscaler's
    page size: what reading the family costs a tool that lists the whole cluster."""
    pages = 0
    started = time.perf_counter()
    for version, resource in FAMILY_KINDS:
        params: dict[str, str | int] = {"limit": PAGE}
        while True:
            resp = client.get(version=version, url=resource, params=params)
            resp.raise_for_status()
            pages += 1
            cont = resp.json()["metadata"].get("continue")
            if not cont:
                break
            params["continue"] = cont
    return {"seconds": time.perf_counter() - started, "requests": {"list": pages}}


def family(b: Bench, *, size: int, cluster_size: int) -> list[dict[str, Any]]:
    """nsscaler on a family of `size` namespaces inside a cluster of `cluster_size` other namespaces with
    their Deployments (all running, no policy on them), next to one cluster-wide LIST."""
    first = cluster.allowed(size, 0)
    results = []
    for rep in range(b.reps):
        say(f"  family {size} in {cluster_size}: rep {rep + 1}/{b.reps}")
        cluster.set_policy(b.api, FAMILY_POLICY, prefix=FAMILY_PREFIX, active=first)
        for scenario in ("first run", "steady state"):
            result = runs.measured(b.plane, lambda: runs.run_nsscaler(b.kubeconfig))
            results.append({"n": size, "scenario": scenario, "tool": "nsscaler", **result})
            if rep == 0:
                runs.check_job_done(b.client, tool="nsscaler", prefix=FAMILY_PREFIX,
                                    held=b.held(FAMILY_PREFIX, first))
        result = runs.measured(b.plane, lambda: cluster_wide_list(b.client))
        results.append({"n": size, "scenario": "cluster-wide LIST", "tool": "reference", **result})
        cluster.set_policy(b.api, FAMILY_POLICY, prefix=FAMILY_PREFIX, active=None)
        runs.run_nsscaler(b.kubeconfig)  # back to all running, unmeasured
    return results


def memory(b: Bench, n: int, *, reset: bool) -> dict[str, Any]:
    """nsscaler's first run over the whole family of n, once: peak RSS does not need a median. `reset`
    gives every Deployment back afterwards (a run as long as the first), for a larger size after it."""
    say(f"  memory N={n}: nsscaler first run")
    first = cluster.allowed(n, 0)
    # The CRD takes at most 1,000 suffixes per policy: the allowed fifth of a larger family is split over
    # several policies with the same scope ("active wins": a namespace any of them keeps stays up).
    names = [POLICY if i == 0 else f"{POLICY}-keep{i}" for i in range(max(1, -(-len(first) // 1000)))]
    for i, name in enumerate(names):
        cluster.set_policy(b.api, name, prefix=PREFIX, active=first[i * 1000:(i + 1) * 1000])
    result = runs.measured(b.plane, lambda: runs.run_nsscaler(b.kubeconfig))
    runs.check_job_done(b.client, tool="nsscaler", prefix=PREFIX, held=b.held(PREFIX, first))
    for name in names[1:]:
        cluster.set_policy(b.api, name, prefix=PREFIX, active=None)
    if reset:
        cluster.set_policy(b.api, POLICY, prefix=PREFIX, active=None)
        runs.run_nsscaler(b.kubeconfig)
    return {"n": n, "scenario": "first run", "tool": "nsscaler", **result}
