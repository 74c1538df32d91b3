"""Every setting of a run: environment variables `NSSCALER_*` and the matching `--flags` (flags win)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from job.model.kinds import BUILTIN_NAMES, Kind

LogFormat = Literal["text", "json"]
Output = Literal["text", "json"]
LogLevel = Literal["debug", "info", "warning", "error"]


def _split_list(value: object) -> object:
    """Lists come as `a,b` from env or flags (or as a JSON list); whitespace is ignored."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            return json.loads(stripped)
        return [item.strip() for item in stripped.split(",") if item.strip()]
    return value


class Settings(BaseSettings):
    """nsscaler: scale every namespace of a family to zero except the active ones, and bring them back."""

    model_config = SettingsConfigDict(
        env_prefix="NSSCALER_",
        cli_prog_name="nsscaler",
        cli_kebab_case=True,
        cli_implicit_flags=True,
        cli_exit_on_error=False,
        cli_hide_none_type=True,
        cli_use_class_docs_for_groups=False,
        extra="forbid",
        validate_default=True,
    )

    # -- connection ------------------------------------------------------------------------------
    kubeconfig: Path | None = Field(
        default=None,
        description="kubeconfig file; default: in a pod its ServiceAccount, else $KUBECONFIG or ~/.kube/config")
    context: str | None = Field(default=None, description="kubeconfig context to use (default: its current one)")
    request_timeout: float = Field(default=15.0, gt=0, le=300, description="seconds one API request may take")
    retry_attempts: int = Field(default=5, ge=1, le=20,
                                description="attempts per API request on connection errors, 429 and 5xx")
    retry_budget: float = Field(default=60.0, gt=0, le=1800,
                                description="seconds one API request may spend retrying in total")
    concurrency: int = Field(default=8, ge=1, le=64, description="PATCH requests in flight at once")
    page_size: int = Field(default=500, ge=1, le=10000,
                           description="items per page of every LIST (namespaces, small objects: 4 times as many)")
    conflict_retries: int = Field(default=3, ge=0, le=10,
                                  description="re-reads of one workload after a 409 Conflict before giving up")
    soft_deadline: float | None = Field(
        default=None, gt=0, le=86400,
        description="seconds after the run starts past which it sends no more changes: it writes what it did to "
                    "the statuses and exits 1, and the next run goes on (the CronJob sets 540, under the Job's "
                    "activeDeadlineSeconds of 600; default: none)")

    # -- behaviour -------------------------------------------------------------------------------
    dry_run: bool = Field(default=False, description="plan and print only: PATCHes go with dryRun=All, no "
                                                     "status and no Events are written")
    default_kinds: Annotated[list[Kind], NoDecode] = Field(
        default=[Kind.DEPLOYMENT, Kind.STATEFULSET],
        description=f"kinds frozen by a policy that leaves spec.kinds out ({', '.join(BUILTIN_NAMES)}, or "
                    f"<Kind>.<group> of a kind with a /scale subresource or a kind row)")
    kind_rows: Path | None = Field(
        default=None,
        description="a YAML file of kind rows (docs/operating/custom-kinds.md), or a directory of them (a mounted "
                    "ConfigMap): kinds a platform team adds without code, besides the shipped catalogue; a bad row "
                    "is reported by name and the others are served")
    protected_namespaces: Annotated[list[str], NoDecode] = Field(
        default=["kube-system"], description="namespaces nsscaler never touches, whatever a policy says")
    own_namespace: str | None = Field(
        default=None, description="namespace the job runs in (never touched; the ICS calendars policies name are "
                                  "read from ConfigMaps there; the CronJob sets it from the downward API; in a pod "
                                  "it defaults to the ServiceAccount's namespace)")
    own_service_account: str = Field(
        default="nsscaler", min_length=1, max_length=253,
        description="the ServiceAccount the job runs as, whose user its hold marks let by (the CronJob sets it "
                    "from the downward API)")
    pod_name: str | None = Field(
        default=None, description="the Pod the run runs in, which the run Lease names (the CronJob sets it from the "
                                  "downward API; default: the host's name)")
    pod_uid: str | None = Field(
        default=None, description="that Pod's uid (the CronJob sets it from the downward API): a run waiting for the "
                                  "run Lease takes it over at once when the Pod that holds it is gone")
    lease_wait: float = Field(
        default=240.0, ge=0, le=3600,
        description="seconds a run with changes to make waits at most while another live run holds the run Lease "
                    "(at most half of --soft-deadline); then it exits 3, naming the holder, and writes nothing")
    max_freeze: int | None = Field(
        default=None, ge=0, description="safety cap: if one run would freeze more workloads than this, it "
                                        "freezes none and fails (default: no cap)")
    restore_wait_in_run: float = Field(
        default=30.0, ge=0, le=600,
        description="seconds one run may wait for a namespace's earlier restore tiers to become available before "
                    "it leaves the next tier to the next run (0: never wait in the run)")
    gitops_syncs: bool = Field(
        default=False,
        description="count the GitOps syncs the hold refused, read from Flux's Kustomizations and HelmReleases and "
                    "Argo CD's Applications cluster-wide (needs their `list`: the gitops-syncs component, the chart's "
                    "gitopsSyncs.enabled; off: no request for them)")
    events: bool = Field(default=True, description="record Events on workloads and NSScalers")
    workload_events_limit: int = Field(
        default=50, ge=0, le=100000,
        description="at most this many Frozen/Restored Events on workloads per run (each is one more write "
                    "for the API server); every run that changes something also records one summary Event "
                    "on the NSScaler")
    status_list_limit: int = Field(default=20, ge=0, le=200,
                                   description="at most this many entries per list in a status (namespace names, "
                                               "the owners of the Pods left in `remaining`)")

    # -- output ----------------------------------------------------------------------------------
    log_format: LogFormat = Field(default="text", description="text, or json (one object a line)")
    log_level: LogLevel = Field(default="info", description="debug, info, warning or error")
    output: Output = Field(default="text", description="text: a summary on stderr; json: the whole run "
                                                       "report as JSON on stdout")

    @field_validator("default_kinds", "protected_namespaces", mode="before")
    @classmethod
    def _lists(cls, value: object) -> object:
        return _split_list(value)

    @field_validator("log_format", "log_level", "output", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value
