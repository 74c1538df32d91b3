"""A workload kind as a policy names it (`Kind`), what `spec.kinds` accepts, and the error of a record that
cannot be restored. Values only: how a kind is frozen is its handler's (the other modules of this package)."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from job.model.kinds.builtin import BUILTIN_NAMES

#: What `spec.kinds` accepts: a built-in kind (`Job`: `BUILTIN_NAMES`, from the rows of `job.model.kinds.builtin`)
#: or `<Kind>.<group>` (`Rollout.argoproj.io`). The CRD's kind patterns (kustomize/base/crd.yaml) are checked
#: against it by a test.
KIND_PATTERN = (rf"^({'|'.join(BUILTIN_NAMES)}|[A-Za-z][A-Za-z0-9]{{0,62}}(\.[a-z0-9]([-a-z0-9]{{0,61}}[a-z0-9])?)+)$")
_KIND = re.compile(KIND_PATTERN)


class MalformedRecord(ValueError):
    """A workload carries our record but its value cannot be restored (someone edited it)."""


class Kind(str):
    """A workload kind as a policy names it. Built-ins are bare (`Deployment`); any other kind carries
    its API group (`Rollout.argoproj.io`). A value type resolved per run, because custom kinds are
    only known once the cluster has been asked."""

    DEPLOYMENT: ClassVar[Kind]
    DAEMONSET: ClassVar[Kind]
    STATEFULSET: ClassVar[Kind]
    CRONJOB: ClassVar[Kind]
    JOB: ClassVar[Kind]
    REPLICASET: ClassVar[Kind]
    REPLICATIONCONTROLLER: ClassVar[Kind]

    __slots__ = ()

    @classmethod
    def parse(cls, text: str) -> Kind:
        if not _KIND.fullmatch(text):
            raise ValueError(f"{text!r} is not a kind nsscaler can freeze: use one of {', '.join(BUILTIN_NAMES)}, "
                             f"or <Kind>.<group> for a kind with a /scale subresource (e.g. Rollout.argoproj.io)")
        return cls(text)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(cls.parse, core_schema.str_schema())

    @property
    def value(self) -> str:
        return str(self)

    @property
    def short(self) -> str:
        """The kind without its group: what `kind:` says in the object."""
        return self.partition(".")[0]

    @property
    def group(self) -> str:
        return self.partition(".")[2]


Kind.DEPLOYMENT = Kind("Deployment")
Kind.DAEMONSET = Kind("DaemonSet")
Kind.STATEFULSET = Kind("StatefulSet")
Kind.CRONJOB = Kind("CronJob")
Kind.JOB = Kind("Job")
Kind.REPLICASET = Kind("ReplicaSet")
Kind.REPLICATIONCONTROLLER = Kind("ReplicationController")
