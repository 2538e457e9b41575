"""LocalCluster: a ringsync cluster of real processes on this machine (one coordinator and
N workers on 127.0.0.1, sockets in a private directory), for tests, examples and trying
ringsync out. It runs the `ringsync-local-cluster` program and stops everything it
started on exit.

    with LocalCluster(world_size=4) as cluster:
        cluster.targets      # ["unix:/tmp/.../w0.sock", ...]; worker i is rank i

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


class LocalCluster:
    def __init__(self, world_size=4, worker_flags=(), coordinator_flags=(), bin_dir=None,
                 startup_timeout=60.0):
        self.world_size = world_size
        self._program = find_program("ringsync-local-cluster", bin_dir)
        self._worker_flags = list(worker_flags)
        self._coordinator_flags = list(coordinator_flags)
        self._startup_timeout = startup_timeout
        self._process = None
        self._dir = None
        self.targets = []
        self.worker_pids = []

    def start(self):
        self._dir = tempfile.TemporaryDirectory(prefix="ringsync-cluster-")
        targets_file = os.path.join(self._dir.name, "targets")
        pids_file = os.path.join(self._dir.name, "pids")
        argv = [self._program, f"--world_size={self.world_size}",
                f"--targets_file={targets_file}", f"--pids_file={pids_file}"]
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
        with open(pids_file) as f:
            self.worker_pids = [int(p) for p in f.read().split()]
        return self

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
