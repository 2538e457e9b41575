"""Runs the hosts' services: in dependency order, health-checked, restarted by policy,
stopped and cleaned up on `down`, SIGINT, SIGTERM or SIGHUP (and, with
exit_with_parent, when the process that started it dies).

Everything happens on one thread: services are spawned with a parent-death signal,
which Linux ties to the spawning thread, so a service must never outlive the loop that
started it. Health probes run as child processes polled by the loop; the control
socket is served by the same loop, one JSON line in and one out per connection.
"""
import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

from . import network as network_module

PR_SET_PDEATHSIG = 1
TICK_S = 0.1
STOP_GRACE_S = 10.0
RESTART_DELAY_S = 1.0


def _set_parent_death_signal(sig):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


class Service:
    """A host's long-running process and what the loop knows about it."""

    def __init__(self, host, log_path):
        self.host = host
        self.log_path = log_path
        self.process = None
        self.status = "created"     # created, running, healthy, unhealthy, exited, killed
        self.exit_code = None
        self.starts = 0
        self.stopped_by_user = False
        self.health_ok = None        # None: no check or not yet decided
        self.failures = 0
        self.probe = None
        self.probe_started = 0.0
        self.next_probe = 0.0
        self.started_at = 0.0
        self.restart_at = None
        self.log_offset = 0

    @property
    def running(self):
        return self.process is not None and self.process.poll() is None


class Supervisor:
    def __init__(self, project, hosts, network, run_dir, print_logs=True,
                 exit_code_from=None, startup_timeout_s=180.0):
        self.project = project
        self.network = network
        self.run_dir = run_dir
        self.print_logs = print_logs
        self.exit_code_from = exit_code_from
        self.startup_timeout_s = startup_timeout_s
        os.makedirs(os.path.join(run_dir, "logs"), exist_ok=True)
        self.services = {h.name: Service(h, os.path.join(run_dir, "logs", f"{h.name}.log"))
                         for h in hosts}
        self.stop_requested = None
        self.ready = False
        self.control = None

    # ------------------------------------------------------------------ main loop
    def run(self, exit_with_parent=False):
        """Returns the process exit status of `up`."""
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        if exit_with_parent:
            _set_parent_death_signal(signal.SIGTERM)
        status = 1
        try:
            self.network.create()
            self._open_control()
            self._write_state()
            self._event("network", f"{len(self.services)} hosts on "
                        f"{self.network.bridge_ns}, addresses "
                        + ", ".join(f"{s.host.name}={s.host.address}"
                                    for s in self.services.values()))
            status = self._loop(wake_read)
        except network_module.NetworkError as error:
            self._event("error", str(error))
            status = 1
        finally:
            self._teardown()
            os.close(wake_read)
            os.close(wake_write)
        return status

    def _on_signal(self, number, _frame):
        self.stop_requested = f"signal {signal.Signals(number).name}"

    def _loop(self, wake_read):
        deadline = time.monotonic() + self.startup_timeout_s
        while self.stop_requested is None:
            self._reap()
            self._start_ready_services()
            self._probe_health()
            self._restart_by_policy()
            self._copy_logs()
            if not self.ready:
                if self._all_up():
                    self.ready = True
                    self._write_state()
                    self._event("ready", "all services started")
                elif time.monotonic() > deadline:
                    waiting = [s.host.name for s in self.services.values() if not self._up(s)]
                    self._event("error", f"not up after {self.startup_timeout_s:.0f}s: "
                                f"{', '.join(waiting)} (logs in {self.run_dir}/logs)")
                    return 1
            if self.exit_code_from is not None:
                watched = self.services[self.exit_code_from]
                if watched.status in ("exited", "killed") and watched.restart_at is None:
                    return watched.exit_code if watched.exit_code is not None else 1
            readable, _, _ = select.select([wake_read, self.control], [], [], TICK_S)
            if wake_read in readable:
                os.read(wake_read, 512)
            if self.control in readable:
                self._serve_control()
        self._event("stopping", self.stop_requested)
        return 0

    # ------------------------------------------------------------------ services
    def _dependencies_met(self, service):
        for name, condition in service.host.depends_on.items():
            dependency = self.services.get(name)
            if dependency is None:
                continue
            if condition == "service_started" and dependency.starts == 0:
                return False
            if condition == "service_healthy" and not (dependency.running and
                                                       dependency.health_ok):
                return False
            if condition == "service_completed_successfully" and not (
                    dependency.status == "exited" and dependency.exit_code == 0):
                return False
        return True

    def _start_ready_services(self):
        for service in self.services.values():
            if service.status == "created" and self._dependencies_met(service):
                self._spawn(service)

    def _spawn(self, service):
        host = service.host
        log = open(service.log_path, "ab")
        try:
            service.process = subprocess.Popen(
                ["ip", "netns", "exec", host.netns] + host.argv,
                env=host.env, cwd=host.cwd, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=lambda: _set_parent_death_signal(signal.SIGKILL))
        finally:
            log.close()
        service.starts += 1
        service.status = "running"
        service.exit_code = None
        service.health_ok = None if host.healthcheck else True
        service.failures = 0
        service.started_at = time.monotonic()
        service.next_probe = service.started_at + 0.3
        service.restart_at = None
        self._event(host.name, f"started pid {service.process.pid} in {host.netns} "
                    f"({host.address}): {' '.join(host.argv)}")

    def _reap(self):
        for service in self.services.values():
            if service.process is None or service.status in ("exited", "killed"):
                continue
            code = service.process.poll()
            if code is None:
                continue
            service.exit_code = code
            service.health_ok = False if service.host.healthcheck else None
            if service.stopped_by_user:
                service.status = "killed"
                self._event(service.host.name, f"killed (exit status {code})")
                continue
            service.status = "exited"
            how = f"signal {-code}" if code < 0 else f"status {code}"
            self._event(service.host.name, f"exited with {how}")
            policy = service.host.restart
            if self.stop_requested is None and (
                    policy in ("always", "unless-stopped") or
                    (policy.startswith("on-failure") and code != 0)):
                service.restart_at = time.monotonic() + RESTART_DELAY_S

    def _restart_by_policy(self):
        now = time.monotonic()
        for service in self.services.values():
            if service.restart_at is not None and now >= service.restart_at:
                self._event(service.host.name, f"restarting (restart: {service.host.restart})")
                self._spawn(service)

    def _probe_health(self):
        now = time.monotonic()
        for service in self.services.values():
            check = service.host.healthcheck
            if check is None or not service.running:
                continue
            if service.probe is not None:
                code = service.probe.poll()
                timed_out = now - service.probe_started > check.timeout_s
                if code is None and not timed_out:
                    continue
                if code is None:
                    service.probe.kill()
                    service.probe.wait()
                self._record_probe(service, code == 0, now)
                service.probe = None
            if now >= service.next_probe:
                env = dict(service.host.env)
                # No PID namespace here: tell the check which process is this service.
                env["RINGSYNC_HEALTHCHECK_PID"] = str(service.process.pid)
                service.probe = subprocess.Popen(
                    ["ip", "netns", "exec", service.host.netns] + check.test,
                    env=env, cwd=service.host.cwd, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    preexec_fn=lambda: _set_parent_death_signal(signal.SIGKILL))
                service.probe_started = now

    def _record_probe(self, service, ok, now):
        check = service.host.healthcheck
        starting = now - service.started_at < check.start_period_s
        if ok:
            service.failures = 0
            if not service.health_ok:
                self._event(service.host.name, "healthy")
            service.health_ok = True
            service.status = "healthy"
        elif not starting or service.health_ok:
            service.failures += 1
            if service.failures >= check.retries and service.health_ok is not False:
                self._event(service.host.name, f"unhealthy ({service.failures} failed checks)")
                service.health_ok = False
                service.status = "unhealthy"
        # Until first healthy, probe every second (Docker's start interval) so that
        # dependants start promptly; afterwards at the service's own interval.
        service.next_probe = now + (check.interval_s if service.health_ok
                                    else min(check.interval_s, 1.0))

    def _up(self, service):
        if service.status == "exited" and service.host.restart == "no":
            return True   # a one-shot service (a trainer) may finish before `ready`
        return service.running and service.health_ok is not False and (
            service.host.healthcheck is None or service.health_ok)

    def _all_up(self):
        return all(self._up(s) for s in self.services.values())

    # ------------------------------------------------------------------ control
    def _open_control(self):
        path = os.path.join(self.run_dir, "control.sock")
        if os.path.exists(path):
            os.unlink(path)
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.control.bind(path)
        os.chmod(path, 0o600)
        self.control.listen(8)

    def _serve_control(self):
        connection, _ = self.control.accept()
        with connection:
            connection.settimeout(5)
            data = b""
            try:
                while not data.endswith(b"\n"):
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                request = json.loads(data.decode() or "{}")
                reply = self._handle(request)
            except (OSError, ValueError) as error:
                reply = {"ok": False, "error": f"bad request: {error}"}
            except network_module.NetworkError as error:
                reply = {"ok": False, "error": str(error)}
            try:
                connection.sendall((json.dumps(reply) + "\n").encode())
            except OSError:
                pass

    def _handle(self, request):
        op = request.get("op")
        if op == "ps":
            self._reap()
            return {"ok": True, "ready": self.ready, "hosts": self._describe()}
        if op == "down":
            self.stop_requested = "down requested"
            return {"ok": True}
        name = request.get("host")
        if op == "shape":
            names = list(self.services) if name == "all" else [name]
            for each in names:
                self.network.shape(each, request.get("rate"), request.get("loss"),
                                   request.get("delay_ms"))
            self._event("shape", f"{', '.join(names)}: "
                        f"{self.network.shaping[names[0]] or 'unshaped'}")
            return {"ok": True}
        if name not in self.services:
            return {"ok": False, "error": f"no host '{name}' (hosts: {', '.join(self.services)})"}
        service = self.services[name]
        if op == "kill":
            service.stopped_by_user = True
            service.restart_at = None
            pids = network_module.kill_namespace_processes(service.host.netns)
            self._event(name, f"host killed: SIGKILL to pids {pids}")
            # Reap it before answering, so that a `ps` right after `kill` reports the
            # host killed rather than its last health check.
            if service.process is not None:
                try:
                    service.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            self._reap()
            return {"ok": True, "pids": pids}
        if op == "start":
            if service.running:
                return {"ok": False, "error": f"{name} is already running"}
            service.stopped_by_user = False
            self._spawn(service)
            return {"ok": True, "pid": service.process.pid}
        if op == "cut":
            self.network.cut(name)
            self._event(name, "link cut")
            return {"ok": True}
        if op == "restore":
            self.network.restore(name)
            self._event(name, "link restored")
            return {"ok": True}
        return {"ok": False, "error": f"unknown operation '{op}'"}

    def _describe(self):
        rows = []
        for name, service in self.services.items():
            rows.append({
                "host": name, "netns": service.host.netns, "address": service.host.address,
                "pid": service.process.pid if service.running else None,
                "status": service.status, "exit_code": service.exit_code,
                "starts": service.starts, "link": self.network.link_state(name),
                "shaping": self.network.shaping.get(name, {}),
                "log": service.log_path})
        return rows

    # ------------------------------------------------------------------ state and logs
    def _write_state(self):
        state = {
            "project": self.project, "pid": os.getpid(), "ready": self.ready,
            "bridge_netns": self.network.bridge_ns,
            "hosts": [{"name": s.host.name, "netns": s.host.netns, "address": s.host.address,
                       "env": s.host.env, "cwd": s.host.cwd, "path_map": s.host.path_map}
                      for s in self.services.values()]}
        path = os.path.join(self.run_dir, "state.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(state, f, indent=1)
        os.replace(path + ".tmp", path)

    def _copy_logs(self):
        if not self.print_logs:
            return
        width = max(len(n) for n in self.services)
        for service in self.services.values():
            try:
                with open(service.log_path, "rb") as f:
                    f.seek(service.log_offset)
                    data = f.read()
            except FileNotFoundError:
                continue
            complete = data.rfind(b"\n") + 1
            service.log_offset += complete
            for line in data[:complete].decode(errors="replace").splitlines():
                sys.stdout.write(f"{service.host.name:<{width}} | {line}\n")
        sys.stdout.flush()

    def _event(self, subject, text):
        sys.stdout.write(f"ringsync-netns: {subject}: {text}\n")
        sys.stdout.flush()

    # ------------------------------------------------------------------ teardown
    def _teardown(self):
        running = [s for s in self.services.values() if s.running]
        ended = [s.process.pid for s in running]
        for service in reversed(running):
            service.stopped_by_user = True
            try:
                os.killpg(service.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        while any(s.running for s in running) and time.monotonic() < deadline:
            time.sleep(TICK_S)
        for service in self.services.values():
            for process in (service.process, service.probe):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()
        self._copy_logs()
        network_module.remove_shared_memory_of(ended)
        removed = self.network.destroy()
        if self.control is not None:
            self.control.close()
            try:
                os.unlink(os.path.join(self.run_dir, "control.sock"))
            except FileNotFoundError:
                pass
        try:
            os.unlink(os.path.join(self.run_dir, "state.json"))
        except FileNotFoundError:
            pass
        self._event("down", f"removed {len(removed)} namespaces; logs kept in "
                    f"{self.run_dir}/logs")
