"""The Kubernetes versions nsscaler supports, and what a server's version means for a run.

Pure: the version is read once at the start of a run (`Kube.server_version`); this module judges it. The range is
the one the version tier proves (devtools/cluster/versions.py lists one server per minor in it; a unit test keeps
the two and the README's table in step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the oldest and newest minor proven, each against a real control plane of that version
OLDEST = (1, 34)
NEWEST = (1, 37)
#: MutatingAdmissionPolicy at admissionregistration.k8s.io/v1: what stamps a Wake's requester when it is left out
MUTATING_POLICY_GA = (1, 36)

_MINOR = re.compile(r"\d+")


def words(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


SUPPORTED_RANGE = f"{words(OLDEST)} to {words(NEWEST)}"


@dataclass(frozen=True)
class ServerVersion:
    """What `/version` says: major and minor as numbers (a provider's "30+" is 30), and the full git version."""

    major: int
    minor: int
    git_version: str

    @classmethod
    def parse(cls, info: dict[str, object]) -> ServerVersion | None:
        """None when the answer has no usable major/minor (a server that hides its version)."""
        found = [_MINOR.search(str(info.get(key, ""))) for key in ("major", "minor")]
        if not all(found):
            return None
        major, minor = (int(m.group()) for m in found if m)
        return cls(major=major, minor=minor, git_version=str(info.get("gitVersion") or f"v{major}.{minor}"))

    @property
    def pair(self) -> tuple[int, int]:
        return self.major, self.minor


@dataclass(frozen=True)
class Verdict:
    """`refused`: the one line of a run that must not start (exit 2). `notes`: said once, at the start of a run."""

    refused: str | None = None
    notes: tuple[str, ...] = ()


def judge(version: ServerVersion | None) -> Verdict:
    if version is None:
        return Verdict(notes=(f"the API server does not say its version; nsscaler is proven on Kubernetes "
                              f"{SUPPORTED_RANGE}",))
    if version.pair < OLDEST:
        return Verdict(refused=f"the cluster runs Kubernetes {version.git_version}, older than nsscaler supports "
                               f"({SUPPORTED_RANGE}): upgrade the cluster, or suspend the CronJob until then")
    notes = []
    if version.pair > NEWEST:
        notes.append(f"the cluster runs Kubernetes {version.git_version}, newer than nsscaler is proven on "
                     f"({SUPPORTED_RANGE}); it runs as on {words(NEWEST)}")
    if version.pair < MUTATING_POLICY_GA:
        notes.append(f"Kubernetes {version.git_version} does not serve MutatingAdmissionPolicy v1: a Wake written by "
                     f"hand must name its requester in spec.requestedBy (kubectl nsscaler wake does this); "
                     f"everything else works as on {words(NEWEST)}")
    return Verdict(notes=tuple(notes))
