"""The Kubernetes API, and the only module that talks to it (pykube-ng) or retries (tenacity).

It owns: the client (in-cluster ServiceAccount or kubeconfig), paginated cluster-wide LISTs, PATCHes with
a resourceVersion precondition, status PATCHes, Events, access reviews, the retry policy and the count of
requests by verb. It decides nothing: callers say what to send.

Dry-run lives here and only here: a write marked `dry_run` goes with `dryRun=All`, so the API server
still checks RBAC and admission but persists nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pykube
import requests
from pykube.http import KubernetesHTTPAdapter

from job import __version__
from job.cluster import answers, kubeconfig, wire
from job.cluster.counter import RequestCounter
from job.errors import ApiError, Conflict, StartupError
from job.model.marks import FIELD_MANAGER
from job.model.settings import Settings

if TYPE_CHECKING:
    import tenacity

log = logging.getLogger(__name__)

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
_JSON_PATCH = {"Content-Type": "application/json-patch+json"}
_METADATA_ONLY = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"}
#: seconds a person's request (`kubectl nsscaler`) may take to connect, and then to answer: one request to a
#: stopped API server is said within twice this
PERSON_TIMEOUT = 4.0
#: the attempts of a person's request whose answer says when to ask again (within `PERSON_TIMEOUT`)
PERSON_ASKED_AGAIN = 3
_AGGREGATED_DISCOVERY = {"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                                   "application/json"}


class _Retryable(ApiError):
    """A response worth another try (429, 5xx); carries the server's Retry-After when it sent one."""

    def __init__(self, status: int, message: str, retry_after: float | None) -> None:
        super().__init__(status, message)
        self.retry_after = retry_after


def _load_config(settings: Settings, *, in_pod: bool | None = None) -> pykube.KubeConfig:
    """ServiceAccount in a pod, else --kubeconfig, $KUBECONFIG (merged), ~/.kube/config; never logs credentials.
    `in_pod=False` for a person's own command (the plugin): their kubeconfig, whatever pod it may run in."""
    found = kubeconfig.source(settings.kubeconfig, os.environ)
    if in_pod is None:
        in_pod = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (_SERVICE_ACCOUNT_DIR / "token").exists()
    try:
        if found is None and in_pod:
            return pykube.KubeConfig.from_service_account()
        found = found or kubeconfig.Source((Path.home() / ".kube" / "config",))
        paths = kubeconfig.existing(found)
        if not paths or not all(p.exists() for p in paths):
            raise StartupError(f"no credentials: kubeconfig {found} does not exist; pass --kubeconfig, set "
                               f"KUBECONFIG, or run in a pod with a ServiceAccount")
        config = (pykube.KubeConfig.from_file(str(paths[0])) if len(paths) == 1 else
                  pykube.KubeConfig(kubeconfig.merge([(p, pykube.KubeConfig.from_file(str(p)).doc) for p in paths])))
        if settings.context:
            if settings.context not in config.contexts:
                raise StartupError(f"context {settings.context!r} is not in {found}; "
                                   f"known: {', '.join(sorted(config.contexts)) or 'none'}")
            config.set_current_context(settings.context)
    except StartupError:
        raise
    except Exception as exc:  # pykube raises plain exceptions for broken files; say which file and why
        raise StartupError(f"cannot load Kubernetes credentials: {type(exc).__name__}: {exc}") from None
    try:  # pykube reads the file's parts only when they are first used: use them here, where a bad one is named
        if not isinstance(config.cluster["server"], str) or not isinstance(config.user, dict):
            raise TypeError("its server or user is not what a kubeconfig holds")
        if why := kubeconfig.unusable_exec(config.user):
            raise TypeError(why)
    except Exception as exc:
        raise StartupError(f"{found} is not a usable kubeconfig ({type(exc).__name__}: {exc}); pass --kubeconfig "
                           f"or set KUBECONFIG to a file with a current context, its cluster's server and "
                           f"its user") from None
    return config


def _settle_environment(session: requests.Session, *, server: str) -> None:
    """Read what the environment says about the connection (proxies, a CA bundle) once, not per request.
    requests otherwise looks for ~/.netrc and scans the environment on every request: a tenth of the
    client's CPU in a first run of 4,000 PATCHes, on cores it shares with the API server."""
    session.proxies.update(requests.utils.get_environ_proxies(server))
    if session.verify is True:
        session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
    session.trust_env = False


class Kube:
    """One connection to one cluster for one run."""

    def __init__(self, settings: Settings, *, config: pykube.KubeConfig | None = None) -> None:
        self.settings = settings
        self.config = config or _load_config(settings)
        adapter = KubernetesHTTPAdapter(self.config, pool_maxsize=max(10, settings.concurrency + 2))
        self.api = pykube.HTTPClient(self.config, timeout=settings.request_timeout, http_adapter=adapter)
        self.api.session.headers["User-Agent"] = f"nsscaler/{__version__}"  # field manager: the part before "/"
        _settle_environment(self.api.session, server=self.server)
        self.requests = RequestCounter()
        #: retry only an answer that says when to ask again (429 or 503 with Retry-After), as kubectl does: a
        #: person's connection, which says anything else at once
        self.retry_only_when_asked = False

    @classmethod
    def as_user(cls, *, kubeconfig: Path | None, context: str | None) -> Kube:
        """A person's connection (`kubectl nsscaler`): their kubeconfig and context, never the ServiceAccount of
        a pod the command may run in, and none of the job's NSSCALER_* environment. Each request is not retried,
        and waits for an answer at most `PERSON_TIMEOUT` seconds: a person is waiting, and an API server that
        does not answer at once is worth saying so at once (they may run the command again), not after a
        retry loop. Only an answer that names when to ask again (an API server whose storage is still starting
        answers 429 with Retry-After) is asked again, within the same `PERSON_TIMEOUT`, as kubectl does."""
        settings = Settings.model_construct(kubeconfig=kubeconfig, context=context, retry_attempts=PERSON_ASKED_AGAIN,
                                            retry_budget=PERSON_TIMEOUT, request_timeout=PERSON_TIMEOUT)
        kube = cls(settings, config=_load_config(settings, in_pod=False))
        kube.retry_only_when_asked = True
        kube.api.session.headers["User-Agent"] = f"kubectl-nsscaler/{__version__}"  # the person's Wakes
        return kube

    def _retrying(self) -> tenacity.Retrying:
        """The retry policy, built when a request first fails: tenacity costs each call ~35 µs, and a large
        first run sends thousands of requests that never fail."""
        import tenacity  # noqa: PLC0415  (only a failure pays for it)

        retry = (tenacity.retry_if_exception(lambda exc: isinstance(exc, _Retryable) and exc.retry_after is not None)
                 if self.retry_only_when_asked else
                 tenacity.retry_if_exception_type((requests.ConnectionError, requests.Timeout, _Retryable)))
        return tenacity.Retrying(
            retry=retry,
            stop=(tenacity.stop_after_attempt(self.settings.retry_attempts)
                  | tenacity.stop_after_delay(self.settings.retry_budget)),
            wait=self._wait,
            before_sleep=self._log_retry,
            reraise=True,
        )

    @property
    def server(self) -> str:
        return str(self.api.url)

    # -- transport -------------------------------------------------------------------------------
    @staticmethod
    def _wait(state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return exc.retry_after
        import tenacity  # noqa: PLC0415

        return float(tenacity.wait_random_exponential(multiplier=0.25, max=8)(state))

    @staticmethod
    def _log_retry(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0
        log.warning("API request failed, retrying in %.1fs (attempt %d): %s", delay, state.attempt_number,
                    exc, extra={"event": "retry", "attempt": state.attempt_number})

    def _send_once(self, verb: str, method: str, **kwargs: Any) -> requests.Response:
        self.requests.add(verb)
        lean: Callable[[], requests.PreparedRequest] | None = kwargs.pop("lean", None)
        resp: requests.Response = (self.api.request(method, **kwargs) if lean is None else
                                   self.api.session.send(lean(), timeout=self.api.timeout))
        if resp.status_code == 429:
            self.requests.add_throttled()
        if resp.status_code in _RETRY_STATUSES:
            raise _Retryable(resp.status_code, answers.error_message(resp), answers.retry_after(resp))
        if resp.status_code == 409:
            raise Conflict(409, answers.error_message(resp))
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, answers.error_message(resp))
        return resp

    def _send(self, verb: str, method: str, *, parse: bool = True, **kwargs: Any) -> Any:
        try:
            try:
                resp = self._send_once(verb, method, **kwargs)
            except (requests.ConnectionError, requests.Timeout, _Retryable) as failed:
                # The policy takes over from the first failure, which it sees as its own first attempt.
                attempts: Iterator[BaseException] = iter([failed])

                def attempt() -> requests.Response:
                    first = next(attempts, None)
                    if first is not None:
                        raise first
                    return self._send_once(verb, method, **kwargs)
                resp = self._retrying()(attempt)
        except _Retryable as exc:
            raise ApiError(exc.status, f"{exc.message} (gave up after retries)") from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise ApiError(0, answers.unreachable(self.server, exc)) from None
        except answers.CREDENTIAL_ERRORS as exc:  # pykube runs the exec plugin inside the request
            if (message := answers.credential_failure(self.config.user, exc)) is None:
                raise
            raise ApiError(0, message) from None
        return resp.json() if parse and resp.content else {}

    # -- reads -----------------------------------------------------------------------------------
    def list_all(self, *, version: str, plural: str, label_selector: str | None = None,
                 field_selector: str | None = None, metadata_only: bool = False,
                 namespace: str | None = None, resume: str | None = None,
                 page_size: int | None = None) -> Iterator[dict[str, Any]]:
        """Every item of one resource, cluster-wide (or in `namespace`), page by page (`limit`/`continue`):
        memory stays bounded by one page, and callers reduce each item as it arrives. `resume` goes on
        from a `first_page`'s continue token; `page_size` overrides the setting's."""
        params: dict[str, Any] = {"limit": page_size or self.settings.page_size}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if resume:
            params["continue"] = resume
        headers = _METADATA_ONLY if metadata_only else {}
        while True:
            where: dict[str, Any] = {"namespace": namespace} if namespace else {}
            page = self._send("list", "GET", version=version, url=plural, params=dict(params), headers=headers,
                              **where)
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            params["continue"] = token

    def collection_version(self, *, version: str, plural: str) -> str:
        """The resourceVersion of a resource's whole collection, cluster-wide (a LIST of one item): where a watch
        starts so that it sees only what comes after."""
        page = self._send("list", "GET", version=version, url=plural, params={"limit": 1})
        return str((page.get("metadata") or {}).get("resourceVersion") or "")

    def watch(self, *, version: str, plural: str, resource_version: str,
              timeout_seconds: int = 300) -> Iterator[dict[str, Any]]:
        """The events of a resource, cluster-wide, after `resource_version`, until the server ends the watch
        (`timeout_seconds`). An expired version (410 Gone), in the answer or as an ERROR event, is an ApiError
        with status 410: list again. Not retried: the caller watches again."""
        self.requests.add("watch")
        resp: requests.Response = self.api.request(
            "GET", version=version, url=plural, stream=True, timeout=(self.settings.request_timeout,
                                                                       timeout_seconds + 30),
            params={"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": timeout_seconds,
                    "allowWatchBookmarks": "true"})
        with contextlib.closing(resp):
            if resp.status_code >= 400:
                raise ApiError(resp.status_code, answers.error_message(resp))
            for line in resp.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise ApiError(int(status.get("code") or 500), str(status.get("message") or "watch error"))
                yield event

    def list_cached(self, *, version: str, plural: str, namespace: str, label_selector: str | None = None,
                    metadata_only: bool = False) -> list[dict[str, Any]]:
        """Every item of one resource in `namespace`, from the API server's watch cache (`resourceVersion=0`):
        no quorum read of etcd first, which halves the server CPU of a small LIST (measured: 1.1 against
        2.2 ms), at the price of data that may be a moment old. Only for reads whose every write carries a
        resourceVersion precondition (a stale object gets a 409 and is read again) and for small ones: the
        server sends such a LIST in one response, whatever the `limit`."""
        params: dict[str, Any] = {"resourceVersion": "0"}
        if label_selector:
            params["labelSelector"] = label_selector
        page = self._send("list", "GET", version=version, url=plural, params=params,
                          headers=_METADATA_ONLY if metadata_only else {}, namespace=namespace)
        return list(page.get("items") or [])

    def first_page(self, *, version: str, plural: str, limit: int,
                   metadata_only: bool = False) -> tuple[list[dict[str, Any]], int | None, str | None]:
        """The first `limit` items of a cluster-wide LIST, how many more there are (the API server's
        `remainingItemCount`; None when it did not say), and the token to go on with (`list_all(resume=)`):
        what a LIST of the rest would cost, for the price of one small request."""
        headers = _METADATA_ONLY if metadata_only else {}
        page = self._send("list", "GET", version=version, url=plural, params={"limit": limit}, headers=headers)
        meta = page.get("metadata") or {}
        token = meta.get("continue") or None
        remaining = meta.get("remainingItemCount")
        return list(page.get("items") or []), (int(remaining) if remaining is not None else
                                               (0 if token is None else None)), token

    def get(self, *, version: str, plural: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object; cluster-scoped without `namespace`."""
        return dict(self._send("get", "GET", version=version, namespace=namespace, url=f"{plural}/{name}"))

    def server_version(self) -> dict[str, Any]:
        """`/version` (readable by every identity, `system:public-info-viewer`). Counted as `version`, not as a
        `get`: it reads no object (the API server's own request metrics leave it out too)."""
        return dict(self._send("version", "GET", version="/", url="version"))

    def discovery(self) -> dict[str, Any]:
        """Every API group with its versions and resources, in one response (aggregated discovery, GA in
        Kubernetes 1.30; an older server answers with the plain group list, without resources). Readable by
        every authenticated identity (`system:discovery`)."""
        # Not version="/apis": pykube ends an empty path with a slash, and /apis/ is the plain group list.
        return dict(self._send("get", "GET", version="/", url="apis", headers=_AGGREGATED_DISCOVERY))

    # -- writes ----------------------------------------------------------------------------------
    def _write_params(self, dry_run: bool) -> dict[str, str]:
        params = {"fieldManager": FIELD_MANAGER}
        if dry_run:
            params["dryRun"] = "All"
        return params

    def patch(self, *, version: str, plural: str, namespace: str | None, name: str, body: dict[str, Any],
              dry_run: bool) -> None:
        """A merge patch (`namespace` None: a cluster-scoped object); `body` carries metadata.resourceVersion, so a
        concurrent change gives Conflict. The response (the whole object) is not parsed: nothing needs it, and a
        large freeze sends thousands, each prepared lean (`job.cluster.wire`)."""
        url = self.server + wire.path(version=version, plural=plural, name=name, namespace=namespace)
        # prepared again for each attempt, as pykube would: its adapter sets the credentials on each one
        self._send("patch", "PATCH", parse=False, lean=lambda: wire.prepared(
            self.api.session, method="PATCH", url=url, params=self._write_params(dry_run), headers=_MERGE_PATCH,
            body=body))

    def json_patch(self, *, version: str, plural: str, namespace: str, name: str,
                   operations: list[dict[str, Any]], timeout: float | None = None) -> None:
        """A JSON patch (RFC 6902), sent once, never retried: its `test` operations are checked against the object
        as stored, so a failed test (422) means the object is not what the caller expects. `timeout`: shorter
        than the run's own, for a caller that tries again itself."""
        try:
            self._send_once("patch", "PATCH", version=version, namespace=namespace, url=f"{plural}/{name}",
                            data=json.dumps(operations), headers=_JSON_PATCH, params=self._write_params(False),
                            **({"timeout": timeout} if timeout else {}))
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise ApiError(0, answers.unreachable(self.server, exc)) from None

    def patch_status(self, *, version: str, plural: str, name: str, status: dict[str, Any],
                     namespace: str | None = None) -> None:
        where: dict[str, Any] = {"namespace": namespace} if namespace else {}
        self._send("patch", "PATCH", version=version, url=f"{plural}/{name}/status", json={"status": status},
                   headers=_MERGE_PATCH, params=self._write_params(False), parse=False, **where)

    def create(self, *, version: str, plural: str, body: dict[str, Any],
               namespace: str | None = None) -> dict[str, Any]:
        """POST `body`; the object as created (a review: with the server's answer in its status). The field
        manager is the API server's default, from the User-Agent: the job's, or a person's plugin."""
        where: dict[str, Any] = {"namespace": namespace} if namespace else {}
        return dict(self._send("create", "POST", version=version, url=plural, json=body, **where))

    def delete(self, *, version: str, plural: str, namespace: str, name: str) -> None:
        self._send("delete", "DELETE", version=version, namespace=namespace, url=f"{plural}/{name}", parse=False)

    def create_event(self, *, namespace: str, involved: dict[str, str], reason: str, message: str,
                     warning: bool, now: dt.datetime) -> None:
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
            "involvedObject": involved, "reason": reason, "message": message[:1024],
            "type": "Warning" if warning else "Normal", "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp,
            "source": {"component": FIELD_MANAGER}, "reportingComponent": FIELD_MANAGER,
            "reportingInstance": socket.gethostname(),
        }
        self._send("create", "POST", namespace=namespace, url="events", json=body,
                   params={"fieldManager": FIELD_MANAGER}, parse=False)

    # -- access ----------------------------------------------------------------------------------
