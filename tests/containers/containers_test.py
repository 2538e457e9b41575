#!/usr/bin/python3
"""Container tests: deploy/docker-compose.yml run for real by a Docker-compatible engine
(podman set up by deploy/container-engine.sh), driven by docker-compose.

  Images.test_*     build every image the compose file uses (ringsync's from the root
                    Dockerfile, Prometheus from Debian's package) and check the image
  Cluster.test_*    up: daemons healthy, trainers exit 0 with VERDICT: OK, ringsyncctl
                    status in the coordinator, a 64 MiB all-reduce through the /dev/shm
                    worker and trainer share; down -v leaves nothing
  Monitoring.test_* the monitoring profile's Prometheus scrapes every daemon with the
                    HTTP bearer token; a scrape without it gets 401, and the coordinator's
                    port refuses a TLS client without a certificate
  Faults.test_*     kill w2: every other rank fails naming it; start w2: the ring re-forms

Run one with `containers_test.py Class.test_name` (ctest does, label "containers").
Exits 77 (skipped) with the reason when not root. Each test starts its own API service
and health-check ticker (deploy/container-engine.sh start, in a directory of its own),
uses a compose project of its own (its network from the engine's pool, 198.19.128.0/17), and removes
every container, network and volume of that project, and stops both processes by PID,
also when it fails. Images stay in podman's storage: they are the build cache.
The compose file authenticates every daemon: each project test makes the credentials as
a user would (deploy/compose-secrets.sh) in a private directory (RINGSYNC_SECRETS_DIR),
removed with the project.
"""
import atexit
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINE = os.path.join(ROOT, "deploy", "container-engine.sh")
COMPOSE_SECRETS = os.path.join(ROOT, "deploy", "compose-secrets.sh")
COMPOSE_FILES = ["-f", os.path.join(ROOT, "deploy", "docker-compose.yml"),
                 "-f", os.path.join(ROOT, "deploy", "docker-compose.local.yml")]
IMAGE = os.environ.get("RINGSYNC_IMAGE", "ringsync:dev")
PROMETHEUS_IMAGE = "localhost/ringsync-prometheus:dev"
DAEMONS = ["coordinator", "w0", "w1", "w2", "w3"]
# How many of each daemon's last log lines a test prints when it ends (RSCT_LOG_TAIL), and
# of its warnings and errors before them.
LOG_TAIL_ON_FAILURE = int(os.environ.get("RSCT_LOG_TAIL", "15"))
LOG_TROUBLE_LINES = 12
TRAINERS = ["train0", "train1", "train2", "train3"]
SOCKET = "unix:/run/ringsync/worker.sock"    # the compose file's worker socket
RINGSYNC_UID = 10001                          # the image's user (Dockerfile)
# Where the compose file mounts a daemon's credentials; ringsyncctl in a daemon's
# container presents that daemon's certificate (as its health check does).
SECRETS = "/run/secrets/ringsync"
CTL_TLS = [f"--tls_ca={SECRETS}/ca.pem", f"--tls_cert={SECRETS}/tls.pem",
           f"--tls_key={SECRETS}/tls.key"]
# Where podman puts compose networks (deploy/container-engine.sh's default_subnet_pools),
# inside the benchmarking range 198.18.0.0/15: never a private range.
ENGINE_POOL = ipaddress.ip_network("198.19.128.0/17")
# The compose file's --heartbeat_timeout (5 s) plus slack for a loaded 2-core machine:
# the bound within which every surviving rank must report a killed worker.
FAILURE_BOUND_S = 5.0 + 15.0


def log(*args):
    print(*args, flush=True)


# ------------------------------------------------------------------------------ the engine
class Engine:
    """podman's Docker API service and health-check ticker for this test process only."""

    def __init__(self):
        self.dir = f"/run/ringsync-containers-test.{os.getpid()}"
        self.env = dict(os.environ, RINGSYNC_ENGINE_DIR=self.dir)
        self.started = False

    def start(self):
        self.stop_orphans()
        # setup is idempotent: on a prepared machine it only reports what is there.
        subprocess.run([ENGINE, "setup"], check=True, env=self.env)
        subprocess.run([ENGINE, "start"], check=True, env=self.env)
        self.started = True
        atexit.register(self.stop)
        return f"unix://{self.dir}/podman.sock"

    @staticmethod
    def stop_orphans():
        """The processes of an earlier run that was killed outright (a ctest timeout):
        its directory names its PID; `stop` ends what it recorded there, by PID."""
        for entry in os.listdir("/run"):
            match = re.fullmatch(r"ringsync-containers-test\.(\d+)", entry)
            if match and not os.path.exists(f"/proc/{match.group(1)}"):
                path = os.path.join("/run", entry)
                log(f"stopping the engine processes a killed run left ({path})")
                subprocess.run([ENGINE, "stop"], env=dict(os.environ, RINGSYNC_ENGINE_DIR=path))
                shutil.rmtree(path, ignore_errors=True)
        Engine.stop_processes_of_dead_runs()

    @staticmethod
    def stop_processes_of_dead_runs():
        """Engine processes whose run directory is gone too (its pid file lost or wrong):
        they name that directory, and so the dead test's PID, on their command line."""
        pattern = re.compile(r"/run/ringsync-containers-test\.(\d+)(?:/podman\.sock)?(?:\s|$)")
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            match = pattern.search(cmdline)
            if not match or os.path.exists(f"/proc/{match.group(1)}"):
                continue
            if "podman system service" not in cmdline and "health-ticker" not in cmdline:
                continue
            log(f"stopping pid {pid}, left by the dead test run {match.group(1)}: {cmdline.strip()}")
            try:
                os.kill(int(pid), signal.SIGTERM)
            except OSError:
                pass

    def stop(self):
        if self.started:
            self.started = False
            subprocess.run([ENGINE, "stop"], env=self.env)
            shutil.rmtree(self.dir, ignore_errors=True)


ENGINE_PROCESSES = Engine()


def podman(*args, timeout=120, check=True):
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shm_files_of_the_image_user():
    """Files in the machine's /dev/shm owned by the image's user: the containers' own
    /dev/shm is a tmpfs of their own, so any such file is a leak."""
    return sorted(f for f in os.listdir("/dev/shm")
                  if os.stat(os.path.join("/dev/shm", f)).st_uid == RINGSYNC_UID)


# ------------------------------------------------------------------------------ a project
class Project:
    """One docker-compose project of deploy/docker-compose.yml (+ the local override)."""

    def __init__(self, name, secrets, **settings):
        self.name = name
        self.secrets = secrets        # deploy/compose-secrets.sh's directory
        self.env = dict(os.environ, DOCKER_HOST=DOCKER_HOST, COMPOSE_PROJECT_NAME=name,
                        RINGSYNC_SECRETS_DIR=secrets,
                        RINGSYNC_COORDINATOR_PORT=str(free_port()),
                        PROMETHEUS_PORT=str(free_port()),
                        COMPOSE_HTTP_TIMEOUT="300")
        self.env.update({k: str(v) for k, v in settings.items()})
        self.container_ids = set()   # every container the test saw (shm mount check)
        self.ids = {}                 # service -> its one container, as last found

    def compose(self, *args, timeout=300, check=True, env=None):
        started = time.monotonic()
        result = subprocess.run(["docker-compose", *COMPOSE_FILES, *args], capture_output=True,
                                text=True, timeout=timeout, env=dict(self.env, **(env or {})))
        log(f"$ docker-compose {' '.join(args)}  ({time.monotonic() - started:.1f}s, exit {result.returncode})")
        if check and result.returncode != 0:
            raise AssertionError(f"docker-compose {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
        return result

    def compose_async(self, *args, env=None):
        return subprocess.Popen(["docker-compose", *COMPOSE_FILES, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                env=dict(self.env, **(env or {})))

    def find_containers(self):
        """service -> the ids of its containers (one-off `run` containers left out), asked
        of podman itself: docker-compose takes 3-9 s a call on a loaded machine (it was
        most of a fault test's time), podman's own CLI well under one. Remembers each
        service's container for container() and every id for the leftover check."""
        out = podman("ps", "-a", "--no-trunc",
                     "--filter", f"label=com.docker.compose.project={self.name}",
                     "--filter", "label=com.docker.compose.oneoff=False",
                     "--format", '{{.ID}} {{index .Labels "com.docker.compose.service"}}')
        found = {}
        for line in out.splitlines():
            container, service = line.split()
            found.setdefault(service, []).append(container)
            self.container_ids.add(container)
        self.ids = {service: ids[0] for service, ids in found.items() if len(ids) == 1}
        return found

    def container(self, service):
        """The id of the service's (one) container, as last found."""
        if service not in self.ids:
            ids = self.find_containers().get(service, [])
            assert len(ids) == 1, f"{service}: containers {ids}"
        return self.ids[service]

    def state(self, service):
        return json.loads(podman("inspect", "--format", "{{json .State}}", self.container(service)))

    def health(self, service):
        state = self.state(service)
        return (state.get("Health") or state.get("Healthcheck") or {}).get("Status", "none")

    def settled_health(self, service, deadline):
        """The service's health once it is no longer "starting" (its check runs every 10 s),
        or "starting" still at `deadline` (time.monotonic())."""
        health = self.health(service)
        while health == "starting" and time.monotonic() < deadline:
            time.sleep(1)
            health = self.health(service)
        return health

    def logs(self, service, tail=200):
        """The container's output, stdout and stderr (the daemons log to stderr)."""
        return subprocess.run(["podman", "logs", "--tail", str(tail), self.container(service)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=60).stdout

    def finished_at(self, service):
        """When the service's container exited, as time.time() would have said."""
        stamp = podman("inspect", "--format", "{{.State.FinishedAt.Unix}} {{.State.FinishedAt.Nanosecond}}",
                       self.container(service)).split()
        return int(stamp[0]) + int(stamp[1]) / 1e9

    def wait_exit(self, service, timeout_s):
        """The exit code of a service's container once it stopped (AssertionError if not)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = self.state(service)
            if state["Status"] in ("exited", "stopped"):
                return state["ExitCode"]
            time.sleep(1)
        raise AssertionError(f"{service} still runs after {timeout_s}s:\n{self.logs(service)[-2000:]}")

    def ring_status(self):
        """`ringsyncctl status` in the coordinator's container (podman exec: as quick as
        `docker-compose exec` is slow; the Cluster test runs the README's compose form)."""
        return json.loads(podman("exec", self.container("coordinator"), "ringsyncctl", "status",
                                 "--json", *CTL_TLS))

    def await_ring(self, newer_than=0, timeout_s=90):
        deadline = time.monotonic() + timeout_s
        view = None
        while time.monotonic() < deadline:
            view = self.ring_status()
            if (view["formed"] and view["generation"] > newer_than and len(view["workers"]) == 4
                    and all(w["ready"] and w["generation"] == view["generation"]
                            for w in view["workers"])):
                return view
            time.sleep(1)
        raise AssertionError(f"no ring newer than generation {newer_than} formed: {view}")

    def address(self, service):
        """The service's address on the compose network (reachable from this host)."""
        return podman("inspect", "--format",
                      "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                      self.container(service)).strip()

    def leftovers(self):
        label = f"label=com.docker.compose.project={self.name}"
        found = {
            "containers": podman("ps", "-a", "-q", "--filter", label).split(),
            "networks": podman("network", "ls", "-q", "--filter", label).split(),
            "volumes": podman("volume", "ls", "-q", "--filter", label).split(),
        }
        with open("/proc/self/mounts") as f:
            mounts = f.read()
        found["shm mounts"] = [c[:12] for c in self.container_ids if c in mounts]
        found["/dev/shm files"] = shm_files_of_the_image_user()
        return {k: v for k, v in found.items() if v}

    def down(self):
        """The trainers, then docker-compose down -v (as deploy/README.md says to on podman:
        down removes containers in parallel, and podman refuses to remove a worker whose
        IPC namespace a trainer still joins). Returns what was left behind, after
        removing that too."""
        self.compose("rm", "-f", "-s", "-v", *TRAINERS, check=False)
        down = self.compose("--profile", "monitoring", "down", "-v", "--remove-orphans",
                            "-t", "5", check=False)
        if down.returncode != 0:
            log(down.stdout[-3000:] + down.stderr[-3000:])
        left = self.leftovers()
        if left:
            log(f"down -v left {left}; removing it")
            for c in left.get("containers", []):
                podman("rm", "-f", "-v", c, check=False)
            for n in left.get("networks", []):
                podman("network", "rm", "-f", n, check=False)
            for v in left.get("volumes", []):
                podman("volume", "rm", "-f", v, check=False)
            for f in left.get("/dev/shm files", []):
                os.unlink(os.path.join("/dev/shm", f))
        return left


def remove_orphan_projects():
    """Containers, networks and volumes of test projects (rsct-NAME-PID) whose test
    process is gone: a run killed outright (a ctest timeout) could not remove them."""
    def orphan(labels):
        match = re.fullmatch(r"rsct-\w+-(\d+)", (labels or {}).get("com.docker.compose.project", ""))
        return match and not os.path.exists(f"/proc/{match.group(1)}")
    for c in json.loads(podman("ps", "-a", "--format", "json") or "[]"):
        if orphan(c.get("Labels")):
            log(f"removing container {c['Names']} of a killed run")
            podman("rm", "-f", "-v", c["Id"], check=False)
    for n in json.loads(podman("network", "ls", "--format", "json") or "[]"):
        if orphan(n.get("labels")):
            log(f"removing network {n['name']} of a killed run")
            podman("network", "rm", "-f", n["name"], check=False)
    for v in json.loads(podman("volume", "ls", "--format", "json") or "[]"):
        if orphan(v.get("Labels")):
            log(f"removing volume {v['Name']} of a killed run")
            podman("volume", "rm", "-f", v["Name"], check=False)


class ProjectTest(unittest.TestCase):
    """Brings a project up per test and always takes it down; fails if down -v left anything."""
    def project(self, **settings):
        remove_orphan_projects()
        name = f"rsct-{type(self).__name__.lower()}-{os.getpid()}"
        # The credentials, as a user makes them before `up` (removed after the project,
        # as cleanups run last-in first-out).
        secrets = tempfile.mkdtemp(prefix=f"{name}-secrets.")
        self.addCleanup(shutil.rmtree, secrets, ignore_errors=True)
        made = subprocess.run([COMPOSE_SECRETS, secrets], capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        log(made.stdout.splitlines()[-1])
        self.p = Project(name, secrets, **settings)
        log(f"project {name}")
        self.addCleanup(self.check_down)
        return self.p

    def check_down(self):
        # The daemons' warnings and errors, where a cause shows, and their last words
        # (ctest shows them only when the test failed).
        for service in DAEMONS:
            try:
                lines = self.p.logs(service, tail=100000).rstrip().splitlines()
            except (AssertionError, subprocess.SubprocessError):
                continue
            trouble = [line for line in lines if " warning [" in line or " error [" in line]
            if trouble:
                log(f"--- {service}: warnings and errors\n" + "\n".join(trouble[:LOG_TROUBLE_LINES]))
            log(f"--- {service}: last log lines\n" + "\n".join(lines[-LOG_TAIL_ON_FAILURE:]))
        left = self.p.down()
        self.assertEqual(left, {}, "docker-compose down -v left these behind")
        log("down -v: no container, network, volume, shm mount or /dev/shm file left")

    def up(self, *services, profile=None, env=None):
        args = (["--profile", profile] if profile else []) + ["up", "-d", *services]
        self.p.compose(*args, timeout=600, env=env)
        self.p.find_containers()

    def assert_daemons_healthy(self, timeout_s=60):
        """Every daemon's health check passes within timeout_s of `up` (it runs every 10 s:
        a daemon is "starting" until its first pass) and ringsyncd runs as its user."""
        deadline = time.monotonic() + timeout_s
        for service in DAEMONS:
            self.assertEqual(self.p.settled_health(service, deadline), "healthy", service)
            user = podman("top", self.p.container(service), "user", "args").splitlines()
            daemon = [line for line in user if "ringsyncd" in line]
            self.assertTrue(daemon and all(line.split()[0] == "ringsync" for line in daemon),
                            f"{service} runs ringsyncd as: {user}")
        log("every daemon healthy, ringsyncd running as user ringsync")


# ------------------------------------------------------------------------------ tests
class Images(unittest.TestCase):
    def test_every_image_the_compose_file_uses_builds_without_a_registry(self):
        env = dict(os.environ, DOCKER_HOST=DOCKER_HOST)
        # ringsync's image first as podman builds it with this machine's ccache mounted
        # (`container-engine.sh build`): the compile is the build's longest step, and the
        # Docker API cannot mount a cache. docker-compose then builds every image as a
        # user's `build` does, finding those layers cached.
        started = time.monotonic()
        build = subprocess.run([ENGINE, "build"], text=True, capture_output=True, timeout=3600)
        self.assertEqual(build.returncode, 0, build.stdout[-6000:] + build.stderr[-3000:])
        log(f"container-engine.sh build: {time.monotonic() - started:.0f}s")
        started = time.monotonic()
        build = subprocess.run(["docker-compose", *COMPOSE_FILES, "--profile", "monitoring",
                                "build"], env=env, text=True, capture_output=True, timeout=3600)
        seconds = time.monotonic() - started
        self.assertEqual(build.returncode, 0, build.stdout[-6000:] + build.stderr[-3000:])
        log(f"docker-compose --profile monitoring build: {seconds:.0f}s")
        # Earlier builds' layers go; the dependency stage stays as the cache (named).
        subprocess.run([ENGINE, "prune"], check=True, env=env)

        inspect = json.loads(podman("image", "inspect", IMAGE))[0]
        config = inspect["Config"]
        log(f"{IMAGE}: {inspect['Size'] / 1e6:.0f} MB, user {config.get('User')}, "
            f"entrypoint {config.get('Entrypoint')}")
        self.assertEqual(config.get("User"), "ringsync:ringsync")
        # Kept only in Docker's image format (an OCI image drops it); podman shows it at
        # the top level.
        healthcheck = inspect.get("Healthcheck") or config.get("Healthcheck") or {}
        log(f"{IMAGE}: HEALTHCHECK {healthcheck}")
        self.assertIn("ringsync-healthcheck", " ".join(healthcheck.get("Test", [])))
        who = podman("run", "--rm", "--network=none", "--entrypoint", "id", IMAGE)
        self.assertIn(f"uid={RINGSYNC_UID}(ringsync)", who)

        # Every binary's libraries resolve in the runtime stage.
        ldd = podman("run", "--rm", "--network=none", "--entrypoint", "bash", IMAGE, "-c",
                     "for b in /opt/ringsync/bin/*; do file=$(head -c4 $b | tr -d '\\0');"
                     " [ \"$file\" = $'\\x7fELF' ] || continue; echo \"== $b\"; ldd $b; done")
        log(ldd)
        self.assertNotIn("not found", ldd)
        for b in ["ringsyncd", "ringsyncctl", "ringsync-train-example", "ringsync-bench"]:
            self.assertIn(f"== /opt/ringsync/bin/{b}", ldd)

        prometheus = json.loads(podman("image", "inspect", PROMETHEUS_IMAGE))[0]
        log(f"{PROMETHEUS_IMAGE}: {prometheus['Size'] / 1e6:.0f} MB")
        version = podman("run", "--rm", "--network=none", PROMETHEUS_IMAGE, "--version")
        self.assertIn("prometheus, version", version)


class Cluster(ProjectTest):
    def test_up_runs_the_job_in_containers_and_down_removes_everything(self):
        p = self.project()
        self.up()    # coordinator, then workers, then trainers (each waits for health)
        for service in DAEMONS:
            address = p.address(service)
            # The engine's address pool (deploy/container-engine.sh): benchmarking range.
            self.assertIn(ipaddress.ip_address(address), ENGINE_POOL, f"{service}: {address}")
        self.assert_daemons_healthy()

        for trainer in TRAINERS:
            self.assertEqual(p.wait_exit(trainer, 240), 0, p.logs(trainer)[-3000:])
        verdict = [line for line in p.logs("train0").splitlines() if "VERDICT" in line]
        log(f"train0: {verdict}")
        self.assertTrue(verdict and verdict[-1].startswith("VERDICT: OK"), verdict)

        status = p.compose("exec", "-T", "coordinator", "ringsyncctl", "status",
                           *CTL_TLS).stdout
        log(status)
        self.assertRegex(status, r"ring formed, generation \d+")
        for worker in ["w0", "w1", "w2", "w3"]:
            self.assertRegex(status, rf"\n\s*\d\s+{worker}\s")

        # /dev/shm: each trainer shares its worker's tmpfs (ipc: service:wN), sized by
        # shm_size. A file one side writes is the other's.
        df = p.compose("exec", "-T", "w0", "df", "-BM", "--output=size", "/dev/shm").stdout
        self.assertEqual(df.split()[-1], "1024M", df)
        p.compose("run", "--rm", "--no-deps", "-T", "--entrypoint", "bash", "train0", "-c",
                  "echo from-train0 >/dev/shm/ringsync-probe")
        seen = p.compose("exec", "-T", "w0", "cat", "/dev/shm/ringsync-probe").stdout
        self.assertEqual(seen.strip(), "from-train0")
        p.compose("exec", "-T", "w0", "rm", "/dev/shm/ringsync-probe")

        # A 64 MiB all-reduce on every rank. The trainer's container has a pid namespace of
        # its own, yet its SDK stages the tensor in memory registered with its worker: the
        # buffer's descriptor goes over the worker's descriptor socket (beside worker.sock
        # on the shared volume), not by pid. ringsync-bench checks every element.
        benches = [p.compose_async("run", "--rm", "--no-deps", "-T", "--entrypoint",
                                   "ringsync-bench", f"train{r}", f"--worker={SOCKET}",
                                   "--min_bytes=64M", "--max_bytes=64M", "--iters=3",
                                   "--warmup_iters=1") for r in range(4)]
        outputs = [b.communicate(timeout=300)[0] for b in benches]
        for rank, (bench, output) in enumerate(zip(benches, outputs)):
            self.assertEqual(bench.returncode, 0, f"rank {rank}:\n{output}")
        log(outputs[0])
        rows = [line for line in outputs[0].splitlines() if re.match(r"\s*67108864\s", line)]
        self.assertEqual(len(rows), 1, outputs[0])
        self.assertEqual(rows[0].split()[-1], "0", f"#wrong: {rows[0]}")
        page = worker_metrics(p, "w0")
        data_paths = [line for line in page.splitlines()
                      if line.startswith("ringsync_collective_data_total")]
        log(f"w0: {data_paths}")
        self.assertTrue(any('path="registered"' in line for line in data_paths), data_paths)
        self.assertFalse(any('path="file"' in line for line in data_paths), data_paths)
        # The workers' containers are hosts of their own to each other: w0's frames to w1
        # take a data connection, sealed under the compose file's mutual TLS.
        self.assertIn('ringsync_peer_transport{edge="next",transport="tcp"} 1', page)
        self.assertIn("go on a sealed data connection", p.logs("w0", tail=100000))


def await_completed_collective(p, worker, timeout_s):
    """Whether `worker` counts a successful collective within timeout_s."""
    ok = re.compile(r'^ringsync_collectives_total\{[^}]*result="ok"[^}]*\} [1-9]', re.M)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ok.search(worker_metrics(p, worker)):
            return True
        time.sleep(0.5)
    return False


def worker_metrics(p, worker):
    """A worker's /metrics page, reached from this host on the compose network with the
    HTTP bearer token."""
    with open(os.path.join(p.secrets, "http-token"), encoding="utf-8") as f:
        token = f.read().strip()
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(f"http://{p.address(worker)}:9400/metrics",
                                      headers={"Authorization": f"Bearer {token}"})
    with direct.open(request, timeout=10) as response:
        return response.read().decode()


class Monitoring(ProjectTest):
    def test_the_monitoring_profiles_prometheus_scrapes_every_daemon(self):
        p = self.project()
        self.up(*DAEMONS, "prometheus", profile="monitoring")
        self.assert_daemons_healthy()
        url = (f"http://127.0.0.1:{p.env['PROMETHEUS_PORT']}/api/v1/query?query=" +
               urllib.parse.quote('{__name__=~"up|ringsync_ring_ready"}'))
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    result = json.load(response)["data"]["result"]
            except OSError as e:
                result = [{"error": str(e)}]
            up = {r["metric"]["instance"]: r["value"][1] for r in result
                  if r.get("metric", {}).get("__name__") == "up"}
            ready = {r["metric"]["instance"]: r["value"][1] for r in result
                     if r.get("metric", {}).get("__name__") == "ringsync_ring_ready"}
            if (set(up.values()) == {"1"} and len(up) == 5 and
                    set(ready.values()) == {"1"} and len(ready) == 4) or \
                    time.monotonic() > deadline:
                break
            time.sleep(2)
        log(f"Prometheus (host port {p.env['PROMETHEUS_PORT']}): up {up}, ring_ready {ready}")
        self.assertEqual(up, {f"{s}:9400": "1" for s in DAEMONS})
        self.assertEqual(ready, {f"w{r}:9400": "1" for r in range(4)})
        self.assertEqual(p.settled_health("prometheus", time.monotonic() + 60), "healthy")
        self.assert_unauthenticated_callers_are_refused(p)

    def assert_unauthenticated_callers_are_refused(self, p):
        # A worker's /metrics (reached from this host on the compose network): 401
        # without the bearer token, 200 with it.
        url = f"http://{p.address('w0')}:9400/metrics"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with self.assertRaises(urllib.error.HTTPError) as refused:
            direct.open(url, timeout=10)
        self.assertEqual(refused.exception.code, 401, refused.exception)
        self.assertIn("ringsync_", worker_metrics(p, "w0"))
        log("w0 /metrics: 401 without the token, 200 with it")

        # The coordinator's port (published on this host's loopback): a TLS client that
        # trusts the CA but has no certificate is refused; with the operator's client
        # certificate (compose-secrets.sh: ca/client-ops) the server speaks HTTP/2.
        port = int(p.env["RINGSYNC_COORDINATOR_PORT"])
        ca = os.path.join(p.secrets, "ca", "ca.pem")
        try:
            answer = http2_hello(port, ca)
        except (ssl.SSLError, ConnectionError) as e:
            answer = e
        log(f"coordinator without a client certificate: {answer!r}")
        self.assertFalse(isinstance(answer, bytes) and answer, "a client without a "
                         f"certificate got an answer: {answer!r}")
        answer = http2_hello(port, ca, os.path.join(p.secrets, "ca", "client-ops.pem"),
                             os.path.join(p.secrets, "ca", "client-ops.key"))
        # An HTTP/2 frame header: 3 bytes length, then the type, 4 = SETTINGS.
        self.assertTrue(len(answer) >= 9 and answer[3] == 4, answer)
        log("coordinator with the client certificate: an HTTP/2 SETTINGS frame")


def http2_hello(port, ca, cert=None, key=None):
    """Mutual TLS to 127.0.0.1:port (the certificate's name: localhost), HTTP/2's client
    preface and an empty SETTINGS frame; the server's first bytes (b"" when it closed)."""
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["h2"])
    if cert:
        context.load_cert_chain(cert, key)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
            tls.sendall(preface + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            return tls.recv(64)


class Faults(ProjectTest):
    def test_a_killed_worker_gives_every_other_rank_a_clear_error_and_start_reforms_the_ring(self):
        # Trainers that would run for a long time: the ring is busy when w2 dies.
        p = self.project(RINGSYNC_TRAIN_STEPS=1000000)
        self.up()
        self.assert_daemons_healthy()
        before = p.await_ring()["generation"]
        # Every trainer is all-reducing once each worker completed a collective. (The
        # first one may take a while: its small all-reduces open the stride links then,
        # and podman's DNS can drop lookups while the trainers' containers start.)
        for worker in ["w0", "w1", "w2", "w3"]:
            self.assertTrue(await_completed_collective(p, worker, 90),
                            f"{worker} completed no collective in 90 s")
        for trainer in TRAINERS:
            self.assertEqual(p.state(trainer)["Status"], "running", p.logs(trainer)[-2000:])

        for trainer in TRAINERS:
            p.container(trainer)
        killed_at = time.time()
        p.compose("kill", "w2")
        for rank in (0, 1, 3):
            code = p.wait_exit(f"train{rank}", 60)
            elapsed = p.finished_at(f"train{rank}") - killed_at
            # The VERDICT line, not merely the last one: the engine's log may hold a line
            # written in two pieces as two.
            tail = p.logs(f"train{rank}", tail=5).splitlines()
            last = next((line for line in reversed(tail) if "VERDICT" in line), "\n".join(tail))
            log(f"train{rank}: exit {code} {elapsed:.1f}s after the kill: {last}")
            self.assertEqual(code, 1)
            self.assertLess(elapsed, FAILURE_BOUND_S, last)
            self.assertRegex(last, r"VERDICT: FAILED")
            self.assertRegex(last, r"rank \d \(generation \d+, collective #\d+")
            self.assertRegex(last, r"worker w2|rank 2 \(worker w2")
        self.assertNotEqual(p.wait_exit("train2", 60), 0)   # its worker is gone
        self.assertIn(p.state("w2")["Status"], ("exited", "stopped"))  # kill: no restart

        p.compose("start", "w2")
        view = p.await_ring(newer_than=before)
        log(f"after start w2: ring formed, generation {view['generation']} (was {before})")
        # The re-formed ring runs a whole job again.
        p.compose("up", "-d", "--no-deps", "--force-recreate", *TRAINERS,
                  env={"RINGSYNC_TRAIN_STEPS": "20"})
        p.find_containers()
        for trainer in TRAINERS:
            self.assertEqual(p.wait_exit(trainer, 180), 0, p.logs(trainer)[-3000:])
        self.assertIn("VERDICT: OK", p.logs("train0"))


# ------------------------------------------------------------------------------ main
DOCKER_HOST = None


def main():
    global DOCKER_HOST
    if os.geteuid() != 0:
        print("SKIPPED: the container tests need root (podman's storage, networks, "
              "/etc/containers); run them as root (CI does)")
        sys.exit(77)
    if not shutil.which("docker-compose"):
        print("FAILED: docker-compose not found; run deploy/install-deps.sh")
        sys.exit(1)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(1))   # runs cleanups and atexit
    DOCKER_HOST = ENGINE_PROCESSES.start()
    try:
        unittest.main(verbosity=2)
    finally:
        ENGINE_PROCESSES.stop()


if __name__ == "__main__":
    main()
