"""LocalCluster: a ringsync cluster of real processes on this machine (one coordinator and
N workers on 127.0.0.1, sockets in a private directory), for tests, examples and trying
ringsync out. It runs the `ringsync-local-cluster` program and stops everything it
started on exit.

    with LocalCluster(world_size=4) as cluster:
        cluster.targets      # ["unix:/tmp/.../w0.sock", ...]; worker i is rank i

With min_world_size the ring is elastic: it goes on with at least that many workers and
takes up to world_size. A worker that exits stops the whole cluster, unless
on_worker_exit="wait": then the others go on (an elastic ring without it) and
restart_exited_workers() starts it again with its id, socket and port:

    with LocalCluster(4, min_world_size=3, on_worker_exit="wait") as cluster:
        cluster.kill_worker(2)            # SIGKILL: the ring re-forms with 3
        cluster.restart_exited_workers()  # back, admitted to the ring again

The programs are looked up in `bin_dir`, else $RINGSYNC_BIN_DIR, else on PATH.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time


def find_program(name, bin_dir=None):
    for directory in (bin_dir, os.environ.get("RINGSYNC_BIN_DIR")):
        if directory and os.access(os.path.join(directory, name), os.X_OK):
            return os.path.join(directory, name)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(
            f"{name} not found: build ringsync (make build) and set RINGSYNC_BIN_DIR to its "
            "bin directory, or put it on PATH")
    return found


def _alive(pid):
    """Whether process `pid` runs (neither gone nor a zombie awaiting its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class LocalCluster:
    def __init__(self, world_size=4, worker_flags=(), coordinator_flags=(), bin_dir=None,
                 startup_timeout=60.0, on_worker_exit="stop", min_world_size=0):
        if on_worker_exit not in ("stop", "wait"):
            raise ValueError(f"on_worker_exit must be 'stop' or 'wait', not {on_worker_exit!r}")
        self.world_size = world_size
        self._program = find_program("ringsync-local-cluster", bin_dir)
        self._worker_flags = list(worker_flags)
        self._coordinator_flags = list(coordinator_flags)
        self._startup_timeout = startup_timeout
        self._on_worker_exit = on_worker_exit
        self._min_world_size = min_world_size
        self._process = None
        self._dir = None
        self.targets = []
        self.worker_pids = []

    def start(self):
        self._dir = tempfile.TemporaryDirectory(prefix="ringsync-cluster-")
        targets_file = os.path.join(self._dir.name, "targets")
        pids_file = os.path.join(self._dir.name, "pids")
        argv = [self._program, f"--world_size={self.world_size}",
                f"--targets_file={targets_file}", f"--pids_file={pids_file}",
                f"--on_worker_exit={self._on_worker_exit}",
                f"--min_world_size={self._min_world_size}"]
        if self._worker_flags:
            argv.append("--worker_flags=" + ",".join(self._worker_flags))
        if self._coordinator_flags:
            argv.append("--coordinator_flags=" + ",".join(self._coordinator_flags))
        self._log = open(os.path.join(self._dir.name, "cluster.log"), "w+")
        self._process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self._startup_timeout
        while not os.path.exists(targets_file):
            if self._process.poll() is not None or time.monotonic() > deadline:
                log = self.log()
                self.stop()
                raise RuntimeError(f"ringsync-local-cluster did not start:\n{log}")
            time.sleep(0.05)
        with open(targets_file) as f:
            self.targets = f.read().split()
        self.worker_pids = self._read_pids()
        return self

    def _read_pids(self):
        with open(os.path.join(self._dir.name, "pids")) as f:
            return [int(p) for p in f.read().split()]

    def kill_worker(self, i, sig=signal.SIGKILL, timeout=10.0):
        """Sends worker i `sig` (default SIGKILL) and waits until it has exited (the
        cluster reaps it)."""
        pid = self.worker_pids[i]
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while _alive(pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker {i} (pid {pid}) did not exit on signal {sig}")
            time.sleep(0.02)

    def restart_exited_workers(self, timeout=60.0):
        """on_worker_exit="wait": starts every worker that has exited again and returns once
        they are ready (worker_pids updated). Raises RuntimeError if the cluster stopped."""
        if self._on_worker_exit != "wait":
            raise RuntimeError("restart_exited_workers needs LocalCluster(on_worker_exit='wait')")
        before = self.worker_pids
        self._process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while True:
            pids = self._read_pids()
            if pids != before:
                self.worker_pids = pids
                return pids
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ringsync-local-cluster restarted no worker:\n{self.log()}")
            time.sleep(0.05)

    def log(self):
        self._log.flush()
        self._log.seek(0)
        return self._log.read()

    def running(self):
        return self._process is not None and self._process.poll() is None

    def stop(self):
        """Stops every process (SIGTERM to ringsync-local-cluster, which stops its
        coordinator and workers and removes their directory). Idempotent."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.send_signal(signal.SIGTERM)
                try:
                    self._process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None
            self._log.close()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()
