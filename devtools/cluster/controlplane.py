"""Start and stop one local control plane (etcd, kube-apiserver, kube-controller-manager) on loopback.

Everything a control plane owns lives in its state folder: certificates, etcd data, component logs and
`state.json` (ports, pids and the processes' start times), so `stop()` kills exactly the processes it started,
from any process.
There is no scheduler and no kubelet: Pods stay Pending, which is all nsscaler needs (it counts them).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests
import yaml

from devtools.cluster import build, pki

#: The controllers nsscaler's behaviour depends on: workloads really get Pods, scaling to 0 really removes
#: them, CronJobs really create Jobs, namespace deletion really finishes, ServiceAccounts really exist.
DEFAULT_CONTROLLERS = (
    "deployment", "replicaset", "statefulset", "job", "cronjob", "namespace", "garbagecollector",
    "serviceaccount", "serviceaccount-token", "root-ca-cert-publisher", "horizontalpodautoscaling",
    "clusterrole-aggregation",
    # a claim carries the kubernetes.io/pvc-protection finalizer: without its controller a namespace that
    # held StatefulSet claims would never finish terminating
    "pvc-protection",
)
#: For the benchmark: thousands of Deployments without thousands of Pods.
BENCH_CONTROLLERS = ("namespace", "garbagecollector", "serviceaccount", "serviceaccount-token",
                     "root-ca-cert-publisher")
_SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CIDR = "10.0.0.0/24"
#: the `kubernetes` Service's ClusterIP: the first address of SERVICE_CIDR
KUBERNETES_SERVICE_IP = "10.0.0.1"
_START_TIMEOUT = 120.0

#: the user name of the tests' cluster admin (its certificate's common name): a Wake it writes names it as requester
ADMIN_USER = "nsscaler-test-admin"


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports: all sockets stay bound until every port is chosen, so the kernel
    cannot hand out the same port twice."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel kills it when the test run that started it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class ControlPlane:
    state_dir: Path
    server: str
    ca_cert: Path
    admin_cert: Path
    admin_key: Path
    admin_kubeconfig: Path
    pids: dict[str, int] = field(default_factory=dict)
    #: each process's start time (`process_start`): what makes a recorded pid still ours
    started: dict[str, int] = field(default_factory=dict)
    #: the build each component runs, for whoever reads state.json
    binaries: dict[str, str] = field(default_factory=dict)
    #: started by `make cluster-up` to outlive the command; a test run must not tie its processes to itself
    detached: bool = False

    # -- persistence -----------------------------------------------------------------------------
    def save(self) -> None:
        data = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        (self.state_dir / "state.json").write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, state_dir: Path) -> ControlPlane:
        data = json.loads((state_dir / "state.json").read_text())
        paths = ("state_dir", "ca_cert", "admin_cert", "admin_key", "admin_kubeconfig")
        return cls(**{k: Path(v) if k in paths else v for k, v in data.items()})

    # -- health ----------------------------------------------------------------------------------
    def session(self) -> requests.Session:
        s = requests.Session()
        s.trust_env = False  # REQUESTS_CA_BUNDLE would silently replace our CA (and proxies would apply)
        s.cert = (str(self.admin_cert), str(self.admin_key))
        s.verify = str(self.ca_cert)
        return s

    def _process_alive(self, name: str) -> bool:
        return name in self.pids and is_running(self.pids[name], self.started.get(name))

    def _launch(self, name: str, args: list[str]) -> None:
        """Start one component and record it (pid and start time) before anything waits for it."""
        self.pids[name], self.started[name] = _spawn(args, self.state_dir / f"{name}.log",
                                                     die_with_parent=not self.detached)
        self.save()

    def is_alive(self) -> bool:
        return all(self._process_alive(name) for name in self.pids)

    def is_ready(self) -> bool:
        try:
            return self.session().get(f"{self.server}/readyz", timeout=3).status_code == 200
        except requests.RequestException:
            return False

    def log_tails(self, lines: int = 30) -> str:
        chunks = []
        for name in ("etcd", "kube-apiserver", "kube-controller-manager"):
            log = self.state_dir / f"{name}.log"
            if log.exists():
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                chunks.append(f"----- {name} ({log}) -----\n" + "\n".join(tail))
        return "\n".join(chunks)

    # -- lifecycle -------------------------------------------------------------------------------
    def stop(self, *, remove_state: bool = True) -> None:
        """Kill exactly the processes this control plane started, the API server first."""
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            if self._process_alive(name):
                _terminate(self.pids[name])
        self.pids, self.started = {}, {}
        if remove_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def stop_apiserver(self) -> None:
        """Kill the API server only (for the restart fault test); `start_apiserver()` brings it back."""
        _terminate(self.pids["kube-apiserver"])

    def start_apiserver(self) -> None:
        """Start the API server again with the flags it was first started with; wait until it is ready."""
        self._launch("kube-apiserver", json.loads((self.state_dir / "kube-apiserver.args.json").read_text()))
        _wait_for(self.is_ready, what="kube-apiserver /readyz after restart", plane=self)

    def restart_apiserver(self, *, down_seconds: float = 0.0) -> None:
        self.stop_apiserver()
        time.sleep(down_seconds)  # how long the API server stays away, not a wait for anything
        self.start_apiserver()

    # -- identities ------------------------------------------------------------------------------
    def kubeconfig(self, path: Path, *, user: str, token: str | None = None, cert: Path | None = None,
                   key: Path | None = None, namespace: str | None = None) -> Path:
        """A kubeconfig for any identity: a bearer token, or a client certificate."""
        creds: dict[str, str] = {"token": token} if token else {
            "client-certificate": str(cert), "client-key": str(key)}
        context = {"cluster": "local", "user": user}
        if namespace:
            context["namespace"] = namespace
        doc = {
            "apiVersion": "v1", "kind": "Config", "current-context": "local",
            "clusters": [{"name": "local", "cluster": {"server": self.server,
                                                       "certificate-authority": str(self.ca_cert)}}],
            "users": [{"name": user, "user": creds}],
            "contexts": [{"name": "local", "context": context}],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(doc))
        path.chmod(0o600)
        return path

    def service_account_token(self, namespace: str, name: str, *, seconds: int = 3600) -> str:
        """A real token from the TokenRequest API: exactly what a pod of that ServiceAccount gets."""
        url = f"{self.server}/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}
        resp = self.session().post(url, json=body, timeout=10)
        resp.raise_for_status()
        return str(resp.json()["status"]["token"])

    def service_account_kubeconfig(self, path: Path, namespace: str, name: str) -> Path:
        token = self.service_account_token(namespace, name)
        return self.kubeconfig(path, user=f"system:serviceaccount:{namespace}:{name}", token=token,
                               namespace=namespace)


def _terminate(pid: int, grace: float = 10.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def parse_stat(stat: str) -> tuple[str, int]:
    """(state, start time) from the text of /proc/<pid>/stat. The command name, in parentheses, may hold spaces and
    parentheses itself: the fields are counted from the last ')'. The start time is field 22, in clock ticks since
    boot."""
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def read_stat(pid: int) -> tuple[str, int] | None:
    """`parse_stat` of a process; None if there is no process `pid`."""
    try:
        return parse_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, IndexError, ValueError):
        return None


def process_start(pid: int) -> int:
    """When a process this one just started began: the kernel sets it at fork and exec keeps it, so unlike
    /proc/<pid>/cmdline (empty until exec has laid out the new program's arguments, which on a busy machine is
    milliseconds after Popen returned) it is right from the first instant; a recycled pid has another one."""
    stat = read_stat(pid)
    if stat is None:  # a child stays in /proc (a zombie at worst) until it is waited for
        raise RuntimeError(f"process {pid} vanished before it was waited for")
    return stat[1]


def is_running(pid: int, started: int | None) -> bool:
    """Whether `pid` is still the process that began at `started` (`process_start`) and has not exited."""
    stat = read_stat(pid)
    return started is not None and stat is not None and stat[1] == started and stat[0] not in ("Z", "X")


def _spawn(args: list[str], log: Path, *, die_with_parent: bool) -> tuple[int, int]:
    """The pid and start time of a new process running `args`, its output appended to `log`."""
    with log.open("ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True,
                                preexec_fn=_die_with_parent if die_with_parent else None)  # noqa: PLW1509 (no threads yet)
    return proc.pid, process_start(proc.pid)


def _how_it_ended(pid: int) -> str:
    """`exit code 1`, `killed by signal 9`: for a process this one started (a zombie until waited for)."""
    try:
        waited, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return "gone (not a child of this process)"
    if waited == 0:  # our child cannot have a recycled pid before it is waited for
        return "running, but not with the start time recorded for it"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _wait_for(check: Callable[[], bool], *, what: str, plane: ControlPlane,
              timeout: float = _START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if plane.pids and not plane.is_alive():
            ended = [f"{name} (pid {pid}) {_how_it_ended(pid)}" for name, pid in plane.pids.items()
                     if not plane._process_alive(name)]
            raise RuntimeError(f"control plane did not become ready ({what}): {', '.join(ended)}\n"
                               f"{plane.log_tails()}")
        time.sleep(0.25)
    raise RuntimeError(f"control plane did not become ready ({what}) in {timeout:.0f}s\n{plane.log_tails()}")


def _node_flags(ca: pki.Authority, node_ip: str) -> list[str]:
    """For a real node: the API server listens on the node's address (where Pods reach it through the
    `kubernetes` Service), publishes that address as the Service's endpoint and can reach kubelet for logs."""
    cert, key = ca.issue("apiserver-kubelet-client", common_name="kube-apiserver-kubelet-client",
                         organization="system:masters")
    return [f"--bind-address={node_ip}", f"--advertise-address={node_ip}", "--endpoint-reconciler-type=lease",
            f"--kubelet-client-certificate={cert}", f"--kubelet-client-key={key}",
            "--kubelet-preferred-address-types=InternalIP"]


def forget_kubectl_discovery(host: str, port: int) -> None:
    """kubectl keeps what a server serves on disk for hours, keyed by host and port only. A new plane that
    gets the port of an earlier one (of another Kubernetes version, or with other CRDs) would otherwise be
    talked to with the earlier plane's resource list: kubectl then sends a request the new server cannot
    answer ("the server could not find the requested resource") instead of saying the kind is not served."""
    cache = Path(os.environ.get("KUBECACHEDIR") or Path.home() / ".kube" / "cache")
    shutil.rmtree(cache / "discovery" / f"{host}_{port}", ignore_errors=True)


def start(state_dir: Path, *, controllers: tuple[str, ...] = DEFAULT_CONTROLLERS,
          die_with_parent: bool = True, node_ip: str | None = None) -> ControlPlane:
    """Start a fresh control plane in `state_dir`; on any failure, stop what was started and raise.
    With `node_ip`, it serves a real node (see `devtools.cluster.node`) on that address instead of loopback."""
    bins = build.ensure_built()
    state_dir.mkdir(parents=True, exist_ok=True)
    pki_dir = state_dir / "pki"
    ca = pki.Authority(pki_dir)
    serving_cert, serving_key = ca.issue("apiserver", common_name="kube-apiserver", server=True,
                                         extra_ips=(node_ip, KUBERNETES_SERVICE_IP) if node_ip else ())
    admin_cert, admin_key = ca.issue("admin", common_name=ADMIN_USER, organization="system:masters")
    sa_private, sa_public = ca.service_account_keys()
    etcd_port, etcd_peer, api_port, kcm_port = free_ports(4)
    forget_kubectl_discovery(node_ip or "127.0.0.1", api_port)
    plane = ControlPlane(state_dir=state_dir, server=f"https://{node_ip or '127.0.0.1'}:{api_port}",
                         ca_cert=ca.ca_cert,
                         admin_cert=admin_cert, admin_key=admin_key,
                         admin_kubeconfig=state_dir / "admin.kubeconfig",
                         binaries={name: str(bins / name) for name in build.versions.BINARIES},
                         detached=not die_with_parent)
    plane.kubeconfig(plane.admin_kubeconfig, user="admin", cert=admin_cert, key=admin_key)
    commands = {
        "etcd": [
            str(bins / "etcd"), "--name=nsscaler-test", f"--data-dir={state_dir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=nsscaler-test=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync", "--quota-backend-bytes=4294967296", "--log-level=warn",
        ],
        "kube-apiserver": [
            str(bins / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--cert-dir={state_dir / 'apiserver-certs'}",
            f"--tls-cert-file={serving_cert}", f"--tls-private-key-file={serving_key}",
            f"--client-ca-file={ca.ca_cert}", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=PodSecurity", f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-issuer={_SA_ISSUER}", f"--service-account-key-file={sa_public}",
            f"--service-account-signing-key-file={sa_private}", "--profiling=false",
            # The default reconciler would publish 127.0.0.1 as the `kubernetes` Service endpoint: invalid.
            "--endpoint-reconciler-type=none",
            # Accept HPAs with minReplicas 0 (alpha in v1.36), so the status that reports them is tested for
            # real; the gate only relaxes API validation, the HPA controller needs no flag.
            "--feature-gates=HPAScaleToZero=true", "--v=1",
        ],
        "kube-controller-manager": [
            str(bins / "kube-controller-manager"), f"--kubeconfig={plane.admin_kubeconfig}",
            f"--authentication-kubeconfig={plane.admin_kubeconfig}",
            f"--authorization-kubeconfig={plane.admin_kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={kcm_port}", "--leader-elect=false",
            f"--controllers={','.join(controllers)}", f"--service-account-private-key-file={sa_private}",
            f"--root-ca-file={ca.ca_cert}", "--concurrent-deployment-syncs=10", "--v=1",
        ],
    }
    if node_ip:  # later flags win: these replace the loopback-only ones above
        commands["kube-apiserver"] += _node_flags(ca, node_ip)
    (state_dir / "kube-apiserver.args.json").write_text(json.dumps(commands["kube-apiserver"]))
    try:
        plane._launch("etcd", commands["etcd"])
        plane._launch("kube-apiserver", commands["kube-apiserver"])
        _wait_for(plane.is_ready, what="kube-apiserver /readyz", plane=plane)
        plane._launch("kube-controller-manager", commands["kube-controller-manager"])
        session = plane.session()
        _wait_for(lambda: session.get(f"{plane.server}/api/v1/namespaces/default/serviceaccounts/default",
                                      timeout=3).status_code == 200,
                  what="the default ServiceAccount (controller manager running)", plane=plane)
    except BaseException:
        plane.stop(remove_state=False)
        raise
    return plane
