"""Which kubeconfig files a connection reads, and how several become one, as kubectl does; no I/O of the API.

`--kubeconfig` names one file. Otherwise `$KUBECONFIG` is a list of files (`:`-separated), merged: the first
file to set `current-context` sets it, and the first file to name a cluster, user or context keeps that entry
whole (client-go's rule; a listed file that does not exist is skipped). Without either, `~/.kube/config`.
Paths inside a file are relative to that file, so they are made absolute before the files are merged.

`job.cluster.kube` turns the result into pykube's KubeConfig: this module only reads and reshapes the files'
contents, so it needs no HTTP library."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the sections merged entry by entry, and the key under which each entry holds its content
_SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}
#: file references inside an entry, by section: relative to the file that holds them
_FILE_KEYS = {"clusters": ("certificate-authority",), "users": ("client-certificate", "client-key")}
#: the exec credential plugin versions pykube-ng 23.6 runs (it refuses client.authentication.k8s.io/v1)
EXEC_VERSIONS = ("client.authentication.k8s.io/v1alpha1", "client.authentication.k8s.io/v1beta1")


@dataclass(frozen=True)
class Source:
    """Where the kubeconfig comes from: the files, and `flag` when `--kubeconfig` named the one file."""

    paths: tuple[Path, ...]
    flag: bool = False

    def __str__(self) -> str:
        if self.flag or len(self.paths) == 1:
            return str(self.paths[0])
        return f"$KUBECONFIG ({os.pathsep.join(map(str, self.paths))})"


def source(explicit: Path | None, environ: Mapping[str, str]) -> Source | None:
    """The files to read: `explicit` alone, else the list in KUBECONFIG; None when neither is given."""
    if explicit is not None:
        return Source((explicit,), flag=True)
    listed = [Path(p).expanduser() for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return Source(tuple(dict.fromkeys(listed))) if listed else None


def existing(found: Source) -> list[Path]:
    """The files of `found` that exist; a named `--kubeconfig` is read even if it does not (and fails there)."""
    return list(found.paths) if found.flag else [p for p in found.paths if p.exists()]


def _absolute(section: str, entry: dict[str, Any], folder: Path) -> dict[str, Any]:
    inner = dict(entry.get(_SECTIONS[section]) or {})
    for key in _FILE_KEYS.get(section, ()):
        if isinstance(inner.get(key), str) and not Path(inner[key]).expanduser().is_absolute():
            inner[key] = str(folder / inner[key])
    command = (inner.get("exec") or {}).get("command") if section == "users" else None
    if isinstance(command, str) and os.sep in command and not Path(command).is_absolute():
        # kubectl resolves an exec command given as a relative path against the kubeconfig's folder
        inner["exec"] = {**inner["exec"], "command": str(folder / command)}
    return {**entry, _SECTIONS[section]: inner}


def merge(docs: Sequence[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """One kubeconfig from several, in order: the first `current-context` set, and the first entry of each
    name, win; file references made absolute against the folder of the file that holds them."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", **{s: [] for s in _SECTIONS}}
    for path, doc in docs:
        if not merged.get("current-context") and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for section in _SECTIONS:
            known = {e.get("name") for e in merged[section]}
            merged[section] += [_absolute(section, e, path.parent) for e in doc.get(section) or []
                                if isinstance(e, dict) and e.get("name") not in known]
    return merged


def unusable_exec(user: Mapping[str, Any]) -> str | None:
    """Why the user's exec credential plugin cannot be run (None: it can, or there is none)."""
    version = (user.get("exec") or {}).get("apiVersion")
    if version is None or version in EXEC_VERSIONS:
        return None
    return (f"its user's exec credential plugin speaks {version}; nsscaler's client (pykube-ng) runs "
            f"{' and '.join(EXEC_VERSIONS)} only")
