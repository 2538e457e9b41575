"""The hosts' network: one namespace per host, a bridge in a namespace of its own.

    [ringsync-w0] eth0 ==veth== veth1 --+
    [ringsync-w1] eth0 ==veth== veth2 --+-- br0 [ringsync--bridge]
    ...

Every link is created with both ends already inside their namespaces, so nothing is
ever added to the network of the namespace ringsync-netns runs in, and the hosts have
no route anywhere but the bridge: their traffic cannot leave the subnet.

Shaping a host's link works on both of its directions: a token bucket (tc tbf) on eth0
limits what the host sends, one on the bridge end limits what it receives; loss drops
packets at random in both directions with nftables (numgen); delay needs the kernel's
netem qdisc and says so when it is missing. Cutting a link takes its bridge end down,
as pulling a cable would: no reset reaches either side, the packets are just lost.

Every link has the kernel's MTU (1500) unless one is given: at 1500 a TCP stream's
payload is at most 1448 of every 1514 bytes a shaped link carries (0.956 of its rate),
with jumbo frames (9000) 8948 of 9014 (0.993), as on cluster networks that run them.
"""
import os
import re
import shutil
import signal
import subprocess
import time

BRIDGE = "br0"
HOST_INTERFACE = "eth0"
NFT_TABLE = "ringsync_netns"


MTU_RANGE = (1280, 65535)  # IPv6's least; a veth link's most


class NetworkError(Exception):
    pass


def check_mtu(mtu):
    """Raises unless every link can take `mtu` (None: the kernel's default)."""
    if mtu is not None and not MTU_RANGE[0] <= mtu <= MTU_RANGE[1]:
        raise NetworkError(f"--mtu {mtu}: bytes, {MTU_RANGE[0]}..{MTU_RANGE[1]} "
                           "(9000 for jumbo frames)")


def run(argv, what, check=True):
    result = subprocess.run(argv, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise NetworkError(f"{what}: `{' '.join(argv)}` failed: "
                           f"{(result.stderr or result.stdout).strip()}")
    return result


def require_privileges():
    """Raises with the reason when this process cannot create network namespaces."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        raise NetworkError("needs iproute2 (ip, tc): run deploy/install-deps.sh as root")
    if os.geteuid() != 0:
        raise NetworkError("needs root: creating network namespaces, veth links and tc "
                           "qdiscs takes CAP_SYS_ADMIN and CAP_NET_ADMIN (try sudo)")


def bridge_namespace(project):
    # Service names cannot start with '-', so no host can take this name.
    return f"{project}--bridge"


def project_namespaces(project):
    """Namespaces of a project, including leftovers of a run that was killed."""
    result = run(["ip", "netns", "list"], "listing namespaces", check=False)
    names = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    return [n for n in names if n.startswith(f"{project}-")]


def namespace_pids(namespace):
    result = run(["ip", "netns", "pids", namespace], "listing processes", check=False)
    return [int(p) for p in result.stdout.split() if p.isdigit()]


def remove_shared_memory_of(pids, directory="/dev/shm"):
    """The hosts share this machine's /dev/shm. When ringsync-netns ends a host's
    processes, their shared-memory files (the SDK names them ringsync-<pid>-...) go too,
    as a dead host's memory would, instead of piling up in this machine's RAM."""
    prefixes = tuple(f"ringsync-{pid}-" for pid in pids)
    if not prefixes or not os.path.isdir(directory):
        return
    for name in os.listdir(directory):
        if name.startswith(prefixes):
            try:
                os.unlink(os.path.join(directory, name))
            except (FileNotFoundError, IsADirectoryError):
                pass


def kill_namespace_processes(namespace):
    """SIGKILLs every process in the namespace, as a host dying would, and removes their
    shared-memory files. Returns their pids."""
    pids = namespace_pids(namespace)
    for pid in pids:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while namespace_pids(namespace) and time.monotonic() < deadline:
        time.sleep(0.05)
    remove_shared_memory_of(pids)
    return pids


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def remove_project(project):
    """Kills every process in the project's namespaces and deletes them. Returns names."""
    removed = []
    for namespace in project_namespaces(project):
        kill_namespace_processes(namespace)
        run(["ip", "netns", "delete", namespace], f"deleting {namespace}", check=False)
        shutil.rmtree(os.path.join("/etc/netns", namespace), ignore_errors=True)
        removed.append(namespace)
    return removed


def parse_rate(text):
    """tc's units -> bits per second: '1gbit', '100mbit', '1.5Gbit/s' are bits; '125mbps'
    (tc: bytes per second) and '125MB/s' are bytes. Case does not matter."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps|b)?(/s)?\s*",
                         str(text), re.IGNORECASE)
    if not match or (match.group(4) and match.group(3) and match.group(3).lower() == "bps"):
        raise NetworkError(f"rate '{text}' is not like 1gbit, 100mbit or 125MB/s")
    value = float(match.group(1))
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[match.group(2).lower()]
    unit = (match.group(3) or "bit").lower()
    bits = value * scale * (1 if unit == "bit" else 8)
    if bits < 8000:
        raise NetworkError(f"rate '{text}' is below 8kbit")
    return int(bits)


class Network:
    def __init__(self, project, hosts, prefix_length, shaping=None, mtu=None):
        """`shaping`: shape()'s keyword arguments, applied to every link on create();
        `mtu`: every link's (both ends and the bridge), None for the kernel's default."""
        check_mtu(mtu)
        self.mtu = mtu
        self.initial_shaping = {k: v for k, v in (shaping or {}).items() if v}
        self.project = project
        self.hosts = {h.name: h for h in hosts}
        self.prefix_length = prefix_length
        self.bridge_ns = bridge_namespace(project)
        self.shaping = {h.name: {} for h in hosts}
        self.cut_links = set()

    # ------------------------------------------------------------------ lifecycle
    def create(self):
        result = run(["ip", "netns", "add", self.bridge_ns], "creating the bridge namespace",
                     check=False)
        if result.returncode != 0:
            raise NetworkError(f"cannot create network namespace {self.bridge_ns}: "
                               f"{result.stderr.strip()} (needs root with CAP_SYS_ADMIN; "
                               "inside a container, --privileged)")
        self._ip(self.bridge_ns, "link", "set", "lo", "up")
        self._ip(self.bridge_ns, "link", "add", BRIDGE, "type", "bridge")
        self._ip(self.bridge_ns, "link", "set", BRIDGE, "up")
        names = {"127.0.0.1": ["localhost"], "::1": ["localhost", "ip6-localhost"]}
        for host in self.hosts.values():
            names.setdefault(host.address, []).append(host.name)
        hosts_file = "".join(f"{address}\t{' '.join(n)}\n" for address, n in names.items())
        for host in self.hosts.values():
            run(["ip", "netns", "add", host.netns], f"creating {host.netns}")
            self._ip(host.netns, "link", "set", "lo", "up")
            run(["ip", "link", "add", HOST_INTERFACE, "netns", host.netns, "type", "veth",
                 "peer", "name", host.veth, "netns", self.bridge_ns],
                f"linking {host.name} to the bridge")
            if self.mtu:
                self._ip(host.netns, "link", "set", HOST_INTERFACE, "mtu", str(self.mtu))
                self._ip(self.bridge_ns, "link", "set", host.veth, "mtu", str(self.mtu))
            self._ip(self.bridge_ns, "link", "set", host.veth, "master", BRIDGE, "up")
            self._ip(host.netns, "addr", "add", f"{host.address}/{self.prefix_length}",
                     "dev", HOST_INTERFACE)
            self._ip(host.netns, "link", "set", HOST_INTERFACE, "up")
            # `ip netns exec` mounts these over /etc/hosts and /etc/resolv.conf: service
            # names resolve as on a compose network, and there is no DNS server to ask.
            etc = os.path.join("/etc/netns", host.netns)
            os.makedirs(etc, exist_ok=True)
            with open(os.path.join(etc, "hosts"), "w", encoding="utf-8") as f:
                f.write(f"# ringsync-netns project {self.project}\n{hosts_file}")
            with open(os.path.join(etc, "resolv.conf"), "w", encoding="utf-8") as f:
                f.write("# ringsync-netns: names come from /etc/hosts; no DNS server\n")
        if self.mtu:  # a bridge takes its ports' least MTU; set it so it never stays lower
            self._ip(self.bridge_ns, "link", "set", BRIDGE, "mtu", str(self.mtu))
        if self.initial_shaping:
            for name in self.hosts:
                self.shape(name, **self.initial_shaping)

    def destroy(self):
        return remove_project(self.project)

    # ------------------------------------------------------------------ faults
    def cut(self, name):
        host = self._host(name)
        self._ip(self.bridge_ns, "link", "set", host.veth, "down")
        self.cut_links.add(name)

    def restore(self, name):
        host = self._host(name)
        self._ip(self.bridge_ns, "link", "set", host.veth, "up")
        self.cut_links.discard(name)

    # ------------------------------------------------------------------ shaping
    def shape(self, name, rate=None, loss_percent=None, delay_ms=None):
        """Replaces the host's shaping: None leaves that part unshaped."""
        host = self._host(name)
        self._clear_shaping(host)
        if delay_ms:
            for namespace, device in ((host.netns, HOST_INTERFACE), (self.bridge_ns, host.veth)):
                self._netem(namespace, device, delay_ms, rate)
        elif rate:
            bits = parse_rate(rate)
            for namespace, device in ((host.netns, HOST_INTERFACE), (self.bridge_ns, host.veth)):
                self._tbf(namespace, device, bits)
        if loss_percent:
            if not 0 < float(loss_percent) <= 100:
                raise NetworkError(f"loss {loss_percent}% is not in (0, 100]")
            self._loss(host, float(loss_percent))
        self.shaping[name] = {k: v for k, v in
                              (("rate", rate), ("loss", loss_percent), ("delay_ms", delay_ms)) if v}

    def _tbf(self, namespace, device, bits):
        rate_bytes = bits / 8
        # A bucket of a few ms of traffic, at least a few GSO packets' worth (veth hands
        # tc 64 KiB super-packets), and a queue of ~25 ms so TCP can fill the link.
        burst = int(max(rate_bytes * 0.004, 4 * 65536))
        limit = int(max(rate_bytes * 0.025, 2 * burst))
        self._tc(namespace, "qdisc", "replace", "dev", device, "root", "tbf",
                 "rate", f"{bits}bit", "burst", str(burst), "limit", str(limit))

    def _netem(self, namespace, device, delay_ms, rate):
        argv = ["qdisc", "replace", "dev", device, "root", "netem", "delay", f"{delay_ms}ms",
                "limit", "100000"]
        if rate:
            argv += ["rate", f"{parse_rate(rate)}bit"]
        result = run(["ip", "netns", "exec", namespace, "tc"] + argv, "delay", check=False)
        if result.returncode != 0:
            reason = result.stderr.strip()
            if "unknown" in reason.lower():
                reason = ("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so links "
                          "cannot be delayed here; rate and loss still work")
            raise NetworkError(f"delaying {device} in {namespace}: {reason}")

    def _loss(self, host, percent):
        if shutil.which("nft") is None:
            raise NetworkError("loss needs nftables (nft): run deploy/install-deps.sh")
        threshold = int(round(percent * 100))  # out of 10000
        rules = (f"table inet {NFT_TABLE} {{\n"
                 f"  chain egress {{ type filter hook output priority 0; policy accept;\n"
                 f"    oifname \"{HOST_INTERFACE}\" numgen random mod 10000 < {threshold} drop; }}\n"
                 f"  chain ingress {{ type filter hook input priority 0; policy accept;\n"
                 f"    iifname \"{HOST_INTERFACE}\" numgen random mod 10000 < {threshold} drop; }}\n"
                 f"}}\n")
        result = subprocess.run(["ip", "netns", "exec", host.netns, "nft", "-f", "-"],
                                input=rules, capture_output=True, text=True)
        if result.returncode != 0:
            raise NetworkError(f"loss on {host.name}: nft: {result.stderr.strip()}")

    def _clear_shaping(self, host):
        for namespace, device in ((host.netns, HOST_INTERFACE), (self.bridge_ns, host.veth)):
            run(["ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", device, "root"],
                "clearing shaping", check=False)
        if shutil.which("nft"):
            run(["ip", "netns", "exec", host.netns, "nft", "delete", "table", "inet", NFT_TABLE],
                "clearing loss", check=False)
        self.shaping[host.name] = {}

    # ------------------------------------------------------------------ helpers
    def link_state(self, name):
        return "cut" if name in self.cut_links else "up"

    def _host(self, name):
        if name not in self.hosts:
            raise NetworkError(f"no host '{name}' (hosts: {', '.join(self.hosts)})")
        return self.hosts[name]

    def _ip(self, namespace, *argv):
        run(["ip", "-n", namespace] + list(argv), f"ip in {namespace}")

    def _tc(self, namespace, *argv):
        run(["ip", "netns", "exec", namespace, "tc"] + list(argv), f"tc in {namespace}")
