"""Where a benchmark's ranks run, with a ringsync worker beside each: this machine (a
LocalCluster on 127.0.0.1) or four network-namespace hosts (ringsync-netns, the compose
topology, links shaped to a rate). Either way a rank is one process started with
start(rank, argv, env); finish() gives its exit status and output. `master` is where rank
0 listens for torch's rendezvous, `gloo_ifname` the interface Gloo must use.
"""
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    """A TCP port free on 127.0.0.1 now, for torch's rendezvous on rank 0 (released just
    before use, so another process could take it first: a rare failed start, not a hang)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _ClusterHosts:
    """Brings its cluster (self._cluster) up and down with the `with` block."""

    def __enter__(self):
        self._cluster.__enter__()
        return self

    def __exit__(self, *exc):
        self._cluster.__exit__(*exc)


class LocalHosts(_ClusterHosts):
    master = "127.0.0.1"
    gloo_ifname = "lo"  # only ever 127.0.0.1, never the host's name

    def __init__(self, nranks):
        from ringsync.local_cluster import LocalCluster
        self._cluster = LocalCluster(world_size=nranks)

    def worker(self, rank):
        return self._cluster.targets[rank]

    def start(self, rank, argv, env):
        return subprocess.Popen(argv, env=dict(os.environ, **env), stdout=subprocess.PIPE,
                                text=True)

    @staticmethod
    def finish(process, timeout_s):
        try:
            output = process.communicate(timeout=timeout_s)[0]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        return process.returncode, output


class NetnsHosts(_ClusterHosts):
    """Hosts w0..w3 of deploy/docker-compose.yml as network namespaces (needs root); every
    link shaped to `rate` each way. security: "tls" (the compose file's mutual TLS, every
    byte of the ring encrypted) or "token" (the cluster token alone: authenticated, not
    encrypted, as Gloo's TCP transport is neither)."""
    master = "w0"  # the hosts reach each other by service name (/etc/hosts per namespace)
    gloo_ifname = "eth0"

    def __init__(self, nranks, rate, security="token", subnet="198.18.7.0/24", mtu=None):
        if nranks != 4:
            raise SystemExit("namespace hosts: the compose topology has 4 workers (--nranks=4)")
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "cluster"))
        import netns_cluster
        reason = netns_cluster.skip_reason()
        if reason:
            raise SystemExit(f"namespace hosts: {reason}")
        compose = {"tls": None, "token": netns_cluster.token_only_compose}[security]
        extra = ["--subnet", subnet] + (["--mtu", str(mtu)] if mtu else [])
        self._cluster = netns_cluster.Cluster(
            "rsopt", ["coordinator", "w0", "w1", "w2", "w3"], rate=rate, extra=extra,
            compose_file=compose() if compose else None)

    @staticmethod
    def worker(rank):
        return "unix:/run/ringsync/worker.sock"  # on each host, as the compose file mounts it

    def start(self, rank, argv, env):
        # A host's commands get its service's environment; the caller's is passed by `env`.
        # Paths absolute: a host's commands start in its service's working directory.
        passed = {k: ":".join(os.path.abspath(p) for p in os.environ[k].split(":"))
                  for k in ("PYTHONPATH", "RINGSYNC_BIN_DIR") if os.environ.get(k)}
        passed.update(env)
        return self._cluster.exec(f"w{rank}", "/usr/bin/env",
                                  *[f"{k}={v}" for k, v in passed.items()], *argv)

    @staticmethod
    def finish(process, timeout_s):
        return process.wait(timeout_s), process.output
