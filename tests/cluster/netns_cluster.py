"""A ringsync-netns cluster for tests: brought up detached, driven through the CLI,
torn down at the end with a check that nothing of it is left behind.

The compose file authenticates every daemon (mutual TLS, an HTTP bearer token), so the
tests make its credentials as a user would, once per test process, with
deploy/compose-secrets.sh in a private directory (RINGSYNC_SECRETS_DIR, which every
ringsync-netns command then inherits), removed at exit. The certificates name the
services (DNS:w0, ...), which is how the hosts reach each other (/etc/hosts per
namespace), so they need no RINGSYNC_CERT_HOSTS."""
import atexit
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NETNS = os.path.join(REPO_ROOT, "deploy", "netns", "ringsync-netns")
BIN_DIR = os.environ.get("RINGSYNC_BIN_DIR", os.path.join(REPO_ROOT, "build", "bin"))
SKIP = 77  # ctest SKIP_RETURN_CODE
COMPOSE_SECRETS = os.path.join(REPO_ROOT, "deploy", "compose-secrets.sh")
# Where the compose file mounts a daemon's credentials (certificate, key, CA, token).
SECRETS_IN_CONTAINER = "/run/secrets/ringsync"
# ringsyncctl on a daemon's host presents that daemon's certificate (as its health check).
CTL_TLS = [f"--tls_ca={SECRETS_IN_CONTAINER}/ca.pem",
           f"--tls_cert={SECRETS_IN_CONTAINER}/tls.pem",
           f"--tls_key={SECRETS_IN_CONTAINER}/tls.key"]
_secrets_dir = None


COMPOSE = os.path.join(REPO_ROOT, "deploy", "docker-compose.yml")
# The compose file's mutual-TLS flags, as each daemon's command lists them.
TLS_FLAGS = re.compile(r"^( *)- --tls_ca=(\S+)/ca\.pem\n\1- --tls_cert=\2/tls\.pem\n"
                       r"\1- --tls_key=\2/tls\.key\n", re.M)


def token_only_compose():
    """The compose file with every daemon's mutual TLS replaced by the cluster token, in a
    directory removed at exit. The token is the one compose-secrets.sh writes into every
    daemon's credentials for the HTTP ports; the daemons then share it as the cluster's."""
    with open(COMPOSE) as f:
        text = f.read()
    derived, count = TLS_FLAGS.subn(r"\1- --token_file=\2/http-token\n", text)
    if count < 2:  # the workers' shared command and the coordinator's
        raise RuntimeError(f"{COMPOSE}: found the mutual-TLS flags of {count} daemons, not 2: "
                         "token_only_compose needs updating for its layout")
    directory = tempfile.mkdtemp(prefix="ringsync-netns-bench.")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    env = os.path.join(os.path.dirname(COMPOSE), ".env")  # read beside the compose file
    if os.path.exists(env):
        shutil.copy(env, directory)
    path = os.path.join(directory, "docker-compose.yml")
    with open(path, "w") as f:
        f.write(derived)
    return path


def make_secrets():
    """The compose file's credentials, made once per process (see the module doc)."""
    global _secrets_dir
    if _secrets_dir is None:
        _secrets_dir = tempfile.mkdtemp(prefix="ringsync-cluster-secrets.")
        atexit.register(shutil.rmtree, _secrets_dir, ignore_errors=True)
        subprocess.run([COMPOSE_SECRETS, _secrets_dir], check=True, capture_output=True,
                       timeout=120)
        os.environ["RINGSYNC_SECRETS_DIR"] = _secrets_dir
    return _secrets_dir


def skip_reason():
    """Why this machine cannot run namespace clusters, or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    probe = "rsprobe--check"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if result.returncode != 0:
        return f"cannot create network namespaces here: {result.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


class Process:
    """A command started on a cluster host in the background (`ringsync-netns exec`);
    a thread collects its output lines as they come."""

    def __init__(self, cluster, host, argv):
        self.host = host
        self.popen = subprocess.Popen(cluster.command("exec", host, "--", *argv),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, bufsize=1)
        self.lines = []
        self.ended = None
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.popen.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        self.popen.stdout.close()
        self.popen.wait()
        with self._changed:
            self.ended = time.monotonic()
            self._changed.notify_all()

    def read_until(self, pattern, timeout_s):
        """The first output line matching pattern (a re.Match), or None at exit/timeout."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._changed:
            while True:
                for line in self.lines[seen:]:
                    match = re.search(pattern, line)
                    if match:
                        return match
                seen = len(self.lines)
                remaining = deadline - time.monotonic()
                if self.ended is not None or remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def wait(self, timeout_s):
        """The exit status; kills the command and raises TimeoutError past timeout_s."""
        self._reader.join(timeout_s)
        if self._reader.is_alive():
            self.popen.kill()
            self._reader.join()
            raise TimeoutError(f"{self.host}: still running after {timeout_s}s:\n{self.output}")
        return self.popen.returncode

    @property
    def output(self):
        with self._changed:
            return "\n".join(self.lines)


class Cluster:
    def __init__(self, project, services=(), rate=None, extra=(), compose_file=None):
        self.project = project
        self.compose_file = compose_file  # None: deploy/docker-compose.yml
        self.services = list(services)
        self.rate = rate
        self.extra = list(extra)
        self.pids = []

    def command(self, *argv):
        make_secrets()
        chosen = ["-f", self.compose_file] if self.compose_file else []
        return ["/usr/bin/python3", NETNS, *chosen, "-p", self.project, *argv]

    def run(self, *argv, check=True):
        result = subprocess.run(self.command(*argv), capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"ringsync-netns {' '.join(argv)} failed "
                                 f"({result.returncode}):\n{result.stdout}{result.stderr}")
        return result

    def __enter__(self):
        argv = ["up", "-d", "--bin-dir", BIN_DIR, *self.extra]
        if self.rate:
            argv += ["--rate", self.rate]
        self.run(*argv, *self.services)
        self.pids = [row["pid"] for row in self.ps() if row["pid"]]
        return self

    def __exit__(self, *exc):
        self.down_and_check()

    def ps(self):
        return json.loads(self.run("ps", "--json").stdout)

    def exec(self, host, *argv):
        process = Process(self, host, argv)
        self.pids.append(process.popen.pid)  # `exec` becomes the command: same pid
        return process

    def log(self, host):
        return self.run("logs", host, check=False).stdout

    def down_and_check(self):
        """`down`, then: no namespace of the project, no hosts file, no process left."""
        self.run("down")
        left = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                          text=True).stdout.split()
                if n.startswith(f"{self.project}-")]
        assert not left, f"namespaces left behind: {left}"
        etc = [n for n in os.listdir("/etc/netns") if n.startswith(f"{self.project}-")] \
            if os.path.isdir("/etc/netns") else []
        assert not etc, f"/etc/netns entries left behind: {etc}"
        alive = [pid for pid in self.pids if os.path.exists(f"/proc/{pid}")
                 and "ringsync" in open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")]
        assert not alive, f"processes left behind: {alive}"
        prefixes = tuple(f"ringsync-{pid}-" for pid in self.pids)
        shm = [n for n in os.listdir("/dev/shm") if prefixes and n.startswith(prefixes)]
        assert not shm, f"shared-memory files left behind in /dev/shm: {shm}"


def bench_rows(output):
    """nccl-tests-style rows of ringsync-bench: size -> dict."""
    rows = {}
    for line in output.splitlines():
        fields = line.split()
        if len(fields) == 8 and fields[0].isdigit():
            rows[int(fields[0])] = {"count": int(fields[1]), "type": fields[2],
                                    "redop": fields[3], "time_us": float(fields[4]),
                                    "algbw": float(fields[5]), "busbw": float(fields[6]),
                                    "wrong": int(fields[7])}
    return rows
