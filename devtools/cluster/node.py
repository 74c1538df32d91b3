"""A real single node beside the local control plane: containerd, kubelet, kube-scheduler and kube-proxy.

Runs as root. Debian's containerd, runc and CNI plugins (`make node-deps`) run with a configuration written per
start: own root, state and socket below the node's state folder, never the system's. kubelet, kube-scheduler and
kube-proxy are built from k8s.io/kubernetes like the control plane (`build.ensure_built(node=True)`); images come
from `images.ensure_images()`, nothing is pulled. The node has its own address on an interface of ours (kubelet needs
one that is not loopback; the API server listens there, and Pods reach it through the `kubernetes` Service's
ClusterIP, which kube-proxy translates). Pods sit on a bridge of ours. `stop()` undoes all of it: see `hostnet`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from devtools.cluster import build, controlplane, hostnet, images, pki
from devtools.cluster.controlplane import _spawn, _terminate, free_ports, is_running

NODE_NAME = "nsscaler-node"
NODE_IP = "10.245.0.1"
POD_CIDR = "10.244.0.0/24"
NODE_LINK = "nss-node0"
BRIDGE = "nss-cni0"
CNI_BIN = Path("/usr/lib/cni")
LOG_LINKS = Path("/var/log/containers")  # kubelet's fixed folder of symlinks to container logs
#: fixed host folders kubelet, containerd's shims and the CNI library write to; removed if a start created them
HOST_FOLDERS = (str(LOG_LINKS), "/run/containerd", "/var/lib/cni")
#: besides the control plane's own: the node lifecycle controller lifts the `not-ready` taint kubelet registers with;
#: the DaemonSet controller puts a DaemonSet's Pod on the node (without a node it has nothing to do); the
#: EndpointSlice controller lists a Service's ready Pods, which kube-proxy and a gateway send requests to
NODE_CONTROLLERS = ("nodelifecycle", "daemonset", "endpointslice")
_ORDER = ("kube-scheduler", "kube-proxy", "kubelet", "containerd")  # the order of stopping
#: kubelet's Pod limit at start; a test may lower it for a while (`Node.set_max_pods`) to fill the node cheaply
MAX_PODS = 250


@dataclass
class Node:
    state_dir: Path
    pids: dict[str, int] = field(default_factory=dict)
    #: each process's start time: what makes a recorded pid still ours (see `controlplane.process_start`)
    started: dict[str, int] = field(default_factory=dict)
    binaries: dict[str, str] = field(default_factory=dict)
    #: host state before the start, put back by stop()
    sysctls: dict[str, str] = field(default_factory=dict)
    netns_before: list[str] = field(default_factory=list)
    created_folders: list[str] = field(default_factory=list)

    @property
    def socket(self) -> Path:
        return self.state_dir / "containerd.sock"

    @property
    def registry_hosts(self) -> Path:
        """containerd's per-registry configuration (`hosts.toml` files): empty, so no registry is reached unless a
        test says how (`reach_registry`)."""
        return self.state_dir / "certs.d"

    def reach_registry(self, host: str) -> Path:
        """Let containerd pull from the plain-HTTP registry at `host` (`127.0.0.1:<port>`, on this host's
        loopback: containerd, not the Pod, pulls), and from no other address for it; returns the hosts.toml.
        containerd reads the folder at every pull: no restart."""
        folder = self.registry_hosts / host
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts.toml").write_text(f'server = "http://{host}"\n\n[host."http://{host}"]\n'
                                           '  capabilities = ["pull", "resolve"]\n')
        return folder / "hosts.toml"

    def forget_registry(self, host: str) -> None:
        shutil.rmtree(self.registry_hosts / host, ignore_errors=True)

    def save(self) -> None:
        data = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        (self.state_dir / "node.json").write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, state_dir: Path) -> Node:
        data = json.loads((state_dir / "node.json").read_text())
        return cls(**{**data, "state_dir": Path(data["state_dir"])})

    def is_alive(self) -> bool:
        return bool(self.pids) and all(is_running(pid, self.started.get(name)) for name, pid in self.pids.items())

    def launch(self, name: str, args: list[str], *, die_with_parent: bool) -> None:
        """Start one of the node's programs and record it (pid and start time) before anything waits for it."""
        self.pids[name], self.started[name] = _spawn(args, self.state_dir / f"{name}.log",
                                                     die_with_parent=die_with_parent)
        self.save()

    def ctr(self, *args: str) -> str:
        return subprocess.run(["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args],
                              capture_output=True, text=True, check=True).stdout

    def set_max_pods(self, plane: controlplane.ControlPlane, max_pods: int, *, timeout: float = 90.0) -> None:
        """Restart kubelet with another `maxPods` and wait until the Node reports it, Ready. Running Pods keep
        running (containerd holds them); kubelet admits them again on start, so the new limit must be at least
        the number of Pods bound to the node, or it rejects the newest (OutOfpods)."""
        config = self.state_dir / "kubelet.yaml"
        settings = yaml.safe_load(config.read_text())
        if settings.get("maxPods") == max_pods and self.is_alive():
            return
        launch = json.loads((self.state_dir / "kubelet.args.json").read_text())
        settings["maxPods"] = max_pods
        config.write_text(yaml.safe_dump(settings))
        _terminate(self.pids.pop("kubelet"))
        self.launch("kubelet", launch["args"], die_with_parent=launch["die_with_parent"])

        def reported() -> bool:
            resp = plane.session().get(f"{plane.server}/api/v1/nodes/{NODE_NAME}", timeout=5)
            capacity = resp.json().get("status", {}).get("capacity", {}) if resp.status_code == 200 else {}
            return capacity.get("pods") == str(max_pods) and _ready(plane)
        controlplane._wait_for(lambda: self.is_alive() and reported(), what=f"kubelet with maxPods {max_pods}",
                               plane=plane, timeout=timeout)

    def log_tails(self, lines: int = 30) -> str:
        chunks = []
        for name in _ORDER:
            log = self.state_dir / f"{name}.log"
            if log.exists():
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                chunks.append(f"----- {name} ({log}) -----\n" + "\n".join(tail))
        return "\n".join(chunks)

    # -- stopping --------------------------------------------------------------------------------
    def drain(self, plane: controlplane.ControlPlane | None, *, timeout: float = 60.0) -> None:
        """Stop scheduling, delete every Pod, and wait until kubelet stopped their sandboxes: that is when
        CNI releases their addresses and removes their veths and network namespaces."""
        if plane is None or not plane.is_ready() or not self.is_alive():
            return
        _terminate(self.pids.pop("kube-scheduler"))
        session = plane.session()
        for ns in session.get(f"{plane.server}/api/v1/namespaces", timeout=10).json()["items"]:
            session.delete(f"{plane.server}/api/v1/namespaces/{ns['metadata']['name']}/pods",
                           params={"gracePeriodSeconds": "1"}, timeout=30)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and "RUNNING" in self.ctr("tasks", "ls"):
            time.sleep(0.5)

    def stop(self, plane: controlplane.ControlPlane | None = None, *, remove_state: bool = True) -> None:
        """Undo everything the start did, even after a crash halfway (each step tolerates absence)."""
        with contextlib.suppress(Exception):
            self.drain(plane)
        for name in _ORDER:
            pid, started = self.pids.pop(name, None), self.started.pop(name, None)
            if pid and is_running(pid, started):
                _terminate(pid)
        if "kube-proxy" in self.binaries:  # its own cleanup removes its rules in every proxy mode
            subprocess.run([self.binaries["kube-proxy"], "--cleanup"], capture_output=True, check=False)
        hostnet.kill(hostnet.processes_using(str(self.socket)))  # shims of sandboxes that did not stop
        hostnet.kill_pods_processes()
        hostnet.delete_new_netns(self.netns_before)
        hostnet.delete_chains()
        hostnet.unmount_under(self.state_dir)
        hostnet.remove_cgroups()
        hostnet.delete_link(BRIDGE)
        hostnet.delete_link(NODE_LINK)
        hostnet.restore_sysctls(self.sysctls)
        _remove_log_links(self.state_dir / "pod-logs")
        for folder in self.created_folders:
            shutil.rmtree(folder, ignore_errors=True)
        for bulky in ("containerd", "containerd-state", "kubelet", "opt"):  # images and Pods' files: gigabytes
            shutil.rmtree(self.state_dir / bulky, ignore_errors=True)
        self.save()
        if remove_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """Whatever of this node is still on the host: empty after a complete stop()."""
        found = [f"process {pid}" for pid in hostnet.processes_using(str(self.state_dir))]
        found += [f"mount {m}" for m in hostnet.mounts_under(self.state_dir)]
        found += [f"link {name}" for name in (NODE_LINK, BRIDGE) if hostnet.link_exists(name)]
        found += [f"{table} chains {chains}" for table, chains in hostnet.our_chains().items()]
        found += [f"cgroup {c}" for c in hostnet.kubepods_cgroups()]
        found += [f"netns {n}" for n in sorted(hostnet.netns_names() - set(self.netns_before))]
        found += [f"folder {f}" for f in self.created_folders if Path(f).exists()]
        return found


def _remove_log_links(pod_logs: Path) -> None:
    """kubelet's links to our containers' logs, in a folder other nodes' kubelets may share."""
    if LOG_LINKS.is_dir():
        for link in LOG_LINKS.iterdir():
            with contextlib.suppress(OSError):
                if link.is_symlink() and str(link.readlink()).startswith(str(pod_logs)):
                    link.unlink()


# -- configuration ---------------------------------------------------------------------------------------
def _containerd_config(node: Node) -> str:
    state = node.state_dir
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    runc = f'{cri[:-1]}.containerd.runtimes.runc]'
    return "\n".join([
        "version = 2", f'root = "{state / "containerd"}"', f'state = "{state / "containerd-state"}"',
        'disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", '
        '"io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", '
        '"io.containerd.tracing.processor.v1.otlp"]',
        "[grpc]", f'  address = "{node.socket}"',
        "[metrics]", '  address = ""',
        '[plugins."io.containerd.internal.v1.opt"]', f'  path = "{state / "opt"}"',
        cri, f'  sandbox_image = "{images.PAUSE_IMAGE}"', '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"', "  enable_selinux = false", "  disable_apparmor = true",
        # Pods' network namespaces in our state folder, not /run/netns.
        "  netns_mounts_under_state_dir = true",
        # No lower oom_score_adj than containerd's own: a host without CAP_SYS_RESOURCE refuses -998 otherwise.
        "  restrict_oom_score_adj = true",
        f"{cri[:-1]}.containerd]", '  snapshotter = "overlayfs"', '  default_runtime_name = "runc"',
        runc, '  runtime_type = "io.containerd.runc.v2"',
        f"{runc[:-1]}.options]", "  SystemdCgroup = false", f'  Root = "{state / "runc"}"',
        # Registries are reached only as a hosts.toml in this folder says (the node tier's own local registry).
        f"{cri[:-1]}.registry]", f'  config_path = "{node.registry_hosts}"',
        f"{cri[:-1]}.cni]", f'  bin_dir = "{CNI_BIN}"', f'  conf_dir = "{state / "cni"}"', "  max_conf_num = 1",
        "",
    ])


def _cni_config(state: Path) -> dict[str, object]:
    """A bridge of ours with a gateway and no masquerading: Pods talk to the node and to each other only."""
    return {"cniVersion": "1.0.0", "name": "nsscaler", "plugins": [{
        "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]], "dataDir": str(state / "cni-ipam"),
                 "routes": [{"dst": "0.0.0.0/0"}]},
    }]}


def _kubelet_config(node: Node, ca: pki.Authority, *, port: int, healthz: int) -> dict[str, object]:
    serving_cert, serving_key = ca.issue("kubelet-serving", common_name=NODE_NAME, server=True, extra_ips=(NODE_IP,))
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": NODE_IP, "port": port, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1", "healthzPort": healthz,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(ca.ca_cert)}},
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(serving_cert), "tlsPrivateKeyFile": str(serving_key),
        # No systemd here and the cgroup v1/hybrid layout: both must be said explicitly.
        "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "podLogsDir": str(node.state_dir / "pod-logs"), "resolvConf": "", "clusterDomain": "cluster.local",
        # The images cannot be pulled again: never garbage-collect them, and never evict for a full disk.
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        # The images are imported, not pulled, and one of them is also pulled from a registry by the release test
        # (the same image under another name): kubelet then checks credentials for every other name of it, and a
        # Pod using the imported name with `imagePullPolicy: Never` fails with ErrImageNeverPull. The node's images
        # are for any Pod: no credential check of images already on it.
        "imagePullCredentialsVerificationPolicy": "NeverVerify",
        "maxPods": MAX_PODS, "serializeImagePulls": False, "rotateCertificates": False,
        "syncFrequency": "10s", "fileCheckFrequency": "10s",
    }


def _kube_proxy_config(kubeconfig: Path, *, healthz: int, metrics: int) -> dict[str, object]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)}, "hostnameOverride": NODE_NAME,
        "bindAddress": NODE_IP, "healthzBindAddress": f"127.0.0.1:{healthz}",
        "metricsBindAddress": f"127.0.0.1:{metrics}", "mode": "iptables", "clusterCIDR": POD_CIDR,
        "nodePortAddresses": [f"{NODE_IP}/32"],
        # No route_localnet sysctl, and the host's conntrack settings stay as they are.
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }


def _identity(plane: controlplane.ControlPlane, ca: pki.Authority, folder: Path, name: str, *, user: str,
              group: str | None = None) -> Path:
    cert, key = ca.issue(name, common_name=user, organization=group)
    return plane.kubeconfig(folder / f"{name}.kubeconfig", user=user, cert=cert, key=key)


# -- starting --------------------------------------------------------------------------------------------
def prepare_host() -> tuple[dict[str, str], list[str]]:
    """Before the control plane starts: the node's address must exist for the API server to bind it. What a
    crashed run left (its processes died with it) is taken over; a node still running is left alone."""
    running = hostnet.processes_using(f"--hostname-override={NODE_NAME}")
    if running:
        raise RuntimeError(f"a node is already running on this host (kubelet pid {running[0]}): "
                           f"`make node-down` where it was started")
    before = hostnet.read_sysctls(), sorted(hostnet.netns_names())
    hostnet.add_address_link(NODE_LINK, NODE_IP)
    return before


def start(plane: controlplane.ControlPlane, state_dir: Path, *, host_before: tuple[dict[str, str], list[str]],
          die_with_parent: bool = True) -> Node:
    """Start containerd, load the images, then kubelet, kube-proxy and kube-scheduler; wait for a Ready node.
    On any failure, undo what was done and raise."""
    bins = build.ensure_built(node=True)
    archives = images.ensure_images()
    state_dir.mkdir(parents=True, exist_ok=True)
    node = Node(state_dir=state_dir, sysctls=host_before[0], netns_before=host_before[1],
                binaries={n: str(bins / n) for n in ("kubelet", "kube-scheduler", "kube-proxy")}
                | {"containerd": shutil.which("containerd") or "containerd"},
                created_folders=[f for f in HOST_FOLDERS if not Path(f).exists()])
    node.save()
    try:
        _start_processes(node, plane, archives, die_with_parent=die_with_parent)
        controlplane._wait_for(lambda: node.is_alive() and _ready(plane), what=f"node {NODE_NAME} Ready",
                               plane=plane)
    except BaseException as exc:
        tails = node.log_tails()
        node.stop(plane, remove_state=False)
        raise RuntimeError(f"the node did not start: {exc}\n{tails}") from exc
    return node


def _start_processes(node: Node, plane: controlplane.ControlPlane, archives: dict[str, Path], *,
                     die_with_parent: bool) -> None:
    state = node.state_dir
    ca = pki.Authority.load(plane.state_dir / "pki")
    (state / "cni").mkdir(exist_ok=True)
    (state / "cni" / "10-nsscaler.conflist").write_text(json.dumps(_cni_config(state), indent=2))
    node.registry_hosts.mkdir(exist_ok=True)
    (state / "containerd.toml").write_text(_containerd_config(node))
    node.launch("containerd", [node.binaries["containerd"], "--config", str(state / "containerd.toml")],
                die_with_parent=die_with_parent)
    controlplane._wait_for(node.socket.exists, what="containerd's socket", plane=plane, timeout=30)
    for archive in archives.values():
        node.ctr("images", "import", str(archive))
    kubelet_port, kubelet_healthz, proxy_healthz, proxy_metrics, sched_port = free_ports(5)
    (state / "kubelet.yaml").write_text(yaml.safe_dump(
        _kubelet_config(node, ca, port=kubelet_port, healthz=kubelet_healthz)))
    kubelet_kc = _identity(plane, ca, state, "kubelet", user=f"system:node:{NODE_NAME}", group="system:nodes")
    proxy_kc = _identity(plane, ca, state, "kube-proxy", user="system:kube-proxy")
    sched_kc = _identity(plane, ca, state, "kube-scheduler", user="system:kube-scheduler")
    (state / "kube-proxy.yaml").write_text(yaml.safe_dump(
        _kube_proxy_config(proxy_kc, healthz=proxy_healthz, metrics=proxy_metrics)))
    commands = {
        "kubelet": [node.binaries["kubelet"], f"--config={state / 'kubelet.yaml'}", f"--kubeconfig={kubelet_kc}",
                    f"--root-dir={state / 'kubelet'}", f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}",
                    "--v=1"],
        "kube-proxy": [node.binaries["kube-proxy"], f"--config={state / 'kube-proxy.yaml'}", "--v=1"],
        "kube-scheduler": [node.binaries["kube-scheduler"], f"--kubeconfig={sched_kc}",
                           f"--authentication-kubeconfig={sched_kc}", f"--authorization-kubeconfig={sched_kc}",
                           "--bind-address=127.0.0.1", f"--secure-port={sched_port}", "--leader-elect=false",
                           "--v=1"],
    }
    # kubelet's command line, to start it again with another configuration (`Node.set_max_pods`)
    (state / "kubelet.args.json").write_text(json.dumps({"args": commands["kubelet"],
                                                         "die_with_parent": die_with_parent}))
    for name, args in commands.items():
        node.launch(name, args, die_with_parent=die_with_parent)


def _ready(plane: controlplane.ControlPlane) -> bool:
    resp = plane.session().get(f"{plane.server}/api/v1/nodes/{NODE_NAME}", timeout=5)
    if resp.status_code != 200:
        return False
    conditions = resp.json().get("status", {}).get("conditions", [])
    taints = resp.json().get("spec", {}).get("taints", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and not taints


def start_with_plane(state_dir: Path, *, die_with_parent: bool = True) -> tuple[controlplane.ControlPlane, Node]:
    """A control plane serving on the node's address, then the node (`state_dir/node`); all undone on failure."""
    host_before = prepare_host()
    try:
        plane = controlplane.start(state_dir, die_with_parent=die_with_parent, node_ip=NODE_IP,
                                   controllers=(*controlplane.DEFAULT_CONTROLLERS, *NODE_CONTROLLERS))
    except BaseException:
        hostnet.delete_link(NODE_LINK)
        raise
    try:
        return plane, start(plane, state_dir / "node", host_before=host_before, die_with_parent=die_with_parent)
    except BaseException:
        plane.stop(remove_state=False)
        raise


def stop_with_plane(plane: controlplane.ControlPlane, node: Node | None, *, remove_state: bool = True) -> None:
    if node is not None:
        node.stop(plane, remove_state=remove_state)
    plane.stop(remove_state=remove_state)
