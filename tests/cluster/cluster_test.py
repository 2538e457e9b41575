#!/usr/bin/python3
"""Cluster tests: the compose topology as real hosts (deploy/netns/ringsync-netns), each
in its own network namespace, links shaped to 1 Gbit/s with tc.

Run one with `cluster_test.py Class.test_name` (ctest does, label "cluster"); exits 77
(skipped) with the reason when this machine cannot create network namespaces.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster  # noqa: E402
from netns_cluster import Cluster, bench_rows  # noqa: E402

WORKERS = ["coordinator", "w0", "w1", "w2", "w3"]
LINK_RATE = "1gbit"
LINK_GBYTES_PER_S = 0.125
SOCKET = "unix:/run/ringsync/worker.sock"   # the compose file's path; rewritten per host
# The compose file's --collective_timeout: a failure must be reported before it.
COLLECTIVE_TIMEOUT_S = 60.0
# The compose file's --heartbeat_timeout: the coordinator declares a silent worker lost
# after it (a killed one at once, when its WatchRing stream closes).
HEARTBEAT_TIMEOUT_S = 5.0
# Every surviving rank fails within the coordinator's detection of the loss (at most the
# heartbeat timeout) plus the dissolved view's delivery: a collective in flight is
# cancelled by that view, and one issued after it fails at once. 10 s of slack above the
# detection covers a loaded 2-core machine; it stays far from the collective deadline.
FAILURE_BOUND_S = HEARTBEAT_TIMEOUT_S + 10.0
MIB = 1 << 20


def ring_status(cluster):
    """The coordinator's view (ringsyncctl status --json, run on the coordinator host)."""
    status = cluster.exec("coordinator", "ringsyncctl", "status", "--json",
                          "--coordinator=coordinator:7400", *netns_cluster.CTL_TLS)
    assert status.wait(30) == 0, status.output
    return json.loads(status.output)


def await_ring(cluster, newer_than, timeout_s=60):
    """Waits until a generation newer than `newer_than` is formed with every worker ready."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = ring_status(cluster)
        if (view["formed"] and view["generation"] > newer_than and
                all(w["ready"] and w["generation"] == view["generation"] for w in view["workers"])):
            return view
        time.sleep(0.5)
    raise AssertionError(f"no ring newer than generation {newer_than} formed: {view}")


def start_clients(cluster, elements, iterations):
    """One ringsync-test-client beside each worker, all-reducing until told otherwise."""
    clients = [cluster.exec(f"w{rank}", "ringsync-test-client", f"--worker={SOCKET}",
                            f"--elements={elements}", f"--iterations={iterations}")
               for rank in range(4)]
    for client in clients:
        assert client.read_until(r"finished 2: ok", 120), (
            f"{client.host}: the ring never ran 3 all-reduces:\n{client.output}")
    return clients


class ComposeTopology(unittest.TestCase):
    def test_the_compose_files_trainers_agree_over_shaped_links(self):
        # Everything the compose file starts by default: coordinator, 4 workers, 4
        # trainers, with their commands, flags, volumes and health checks.
        with Cluster("rsct", rate=LINK_RATE) as cluster:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                trainers = [r for r in cluster.ps() if r["host"].startswith("train")]
                if all(r["status"] in ("exited", "killed") for r in trainers):
                    break
                time.sleep(1)
            self.assertEqual(len(trainers), 4)
            for row in trainers:
                self.assertEqual(row["exit_code"], 0, f"{row['host']}:\n{cluster.log(row['host'])}")
            # Rank 0's trainer compares all ranks' parameters with a single-process run.
            self.assertIn("VERDICT: OK", cluster.log("train0"))
            hosts = {r["host"]: r for r in cluster.ps()}
            self.assertEqual(hosts["w0"]["address"], "198.18.0.11")
            self.assertTrue(all(r["shaping"] == {"rate": LINK_RATE} for r in hosts.values()))


class ShapedRing(unittest.TestCase):
    def test_allreduce_is_exact_from_1KiB_to_64MiB_on_1gbit_links(self):
        with Cluster("rssr", WORKERS, rate=LINK_RATE) as cluster:
            benches = [cluster.exec(f"w{rank}", "ringsync-bench", f"--worker={SOCKET}",
                                    "--min_bytes=1K", "--max_bytes=64M", "--iters=5",
                                    "--warmup_iters=2") for rank in range(4)]
            statuses = [b.wait(600) for b in benches]
            report = benches[0].output
            print(report)
            for bench, status in zip(benches, statuses):
                self.assertEqual(status, 0, f"{bench.host}:\n{bench.output}")
            rows = bench_rows(report)
            self.assertEqual(sorted(rows), [1024 << i for i in range(17)])
            self.assertTrue(all(r["wrong"] == 0 for r in rows.values()))
            for size in (16 * MIB, 64 * MIB):
                busbw = rows[size]["busbw"]
                # A report, not an assertion on speed: the ring's bound is busbw = link rate.
                print(f"CLUSTER busbw at {size // MIB} MiB, N=4, {LINK_RATE} links: "
                      f"{busbw:.3f} GB/s = {busbw / LINK_GBYTES_PER_S:.2f} of the link rate "
                      f"({LINK_GBYTES_PER_S} GB/s)")

    def test_results_stay_exact_on_lossy_links(self):
        # 2% random loss on every link, both directions: TCP retransmits, nothing is
        # corrupted or lost at the ringsync level. Several dtypes and ops.
        with Cluster("rsls", WORKERS, rate=LINK_RATE) as cluster:
            cluster.run("shape", "all", "--rate", LINK_RATE, "--loss", "2")
            for dtype, op in (("float32", "sum"), ("bfloat16", "max"), ("int32", "prod")):
                benches = [cluster.exec(f"w{rank}", "ringsync-bench", f"--worker={SOCKET}",
                                        "--min_bytes=1K", "--max_bytes=4M", "--step_factor=4",
                                        "--iters=2", "--warmup_iters=1", f"--dtype={dtype}",
                                        f"--op={op}") for rank in range(4)]
                for bench in benches:
                    self.assertEqual(bench.wait(300), 0, f"{bench.host}:\n{bench.output}")
                rows = bench_rows(benches[0].output)
                self.assertEqual(len(rows), 7, benches[0].output)
                self.assertTrue(all(r["wrong"] == 0 and r["type"] == dtype for r in rows.values()))


class Monitoring(unittest.TestCase):
    def test_the_monitoring_profiles_prometheus_scrapes_every_daemon_across_hosts(self):
        with Cluster("rsmo", WORKERS + ["prometheus"], extra=["--profile", "monitoring"]) as cluster:
            deadline = time.monotonic() + 60
            while True:
                query = cluster.exec("prometheus", "curl", "-sf",
                                     "http://127.0.0.1:9090/api/v1/query?query=up")
                self.assertEqual(query.wait(30), 0, query.output)
                targets = {r["metric"]["instance"]: r["value"][1]
                           for r in json.loads(query.output)["data"]["result"]}
                if sorted(targets) == ["coordinator:9400"] + [f"w{r}:9400" for r in range(4)] \
                        and set(targets.values()) == {"1"} or time.monotonic() > deadline:
                    break
                time.sleep(1)
            self.assertEqual(targets, {"coordinator:9400": "1", "w0:9400": "1", "w1:9400": "1",
                                       "w2:9400": "1", "w3:9400": "1"})


class RingFaults:
    """Checks shared by the tests that break a running ring (a unittest.TestCase mixin)."""

    def break_the_ring(self, cluster, fault, host):
        """All-reduces running on every rank, then `fault` (kill, cut) on `host`: every
        other rank must fail clearly. Returns the clients."""
        clients = start_clients(cluster, elements=4 * MIB, iterations=100000)
        fault_time = time.monotonic()
        cluster.run(fault, host)
        self.assert_clear_errors(clients, fault_time, lost=host)
        return clients

    def assert_clear_errors(self, clients, fault_time, lost):
        """Every surviving rank fails within FAILURE_BOUND_S (not the collective
        deadline), naming the lost worker, its rank and the generation."""
        for client in clients:
            if client.host == lost:
                continue
            status = client.wait(COLLECTIVE_TIMEOUT_S + 30)
            elapsed = client.ended - fault_time
            failure = client.output.splitlines()[-1]
            print(f"{client.host}: error after {elapsed:.1f}s: {failure}")
            self.assertNotEqual(status, 0, client.output)
            self.assertLess(elapsed, FAILURE_BOUND_S, failure)
            self.assertRegex(failure, r"rank \d \(generation \d+, collective #\d+ 'step'(, client collective \d+)?\)")
            self.assertRegex(failure, rf"worker {lost}|rank 2 \(worker {lost}\)")
            # Their own worker is alive: no "lost the worker" hint.
            self.assertNotIn("lost the worker", failure)



class Faults(RingFaults, unittest.TestCase):
    def test_a_killed_host_gives_every_other_rank_a_clear_error(self):
        with Cluster("rskh", WORKERS, rate=LINK_RATE) as cluster:
            clients = self.break_the_ring(cluster, "kill", "w2")
            # The trainer on the killed host died with it.
            self.assertEqual(clients[2].wait(30), -9)
            w2 = next(r for r in cluster.ps() if r["host"] == "w2")
            self.assertEqual(w2["status"], "killed")   # restart policy does not revive it

    def test_a_cut_link_gives_every_rank_a_clear_error_and_restoring_it_heals_the_ring(self):
        with Cluster("rscl", WORKERS, rate=LINK_RATE) as cluster:
            clients = self.break_the_ring(cluster, "cut", "w2")
            # w2 itself cannot reach anyone; its trainer's collective fails too.
            self.assertNotEqual(clients[2].wait(COLLECTIVE_TIMEOUT_S + 30), 0)
            cluster.run("restore", "w2")
            # The coordinator dropped w2 (missed heartbeats); w2 rejoins by itself and a
            # new generation forms with all four. Its trainers then start again.
            await_ring(cluster, newer_than=1)
            again = start_clients(cluster, elements=MIB, iterations=5)
            for client in again:
                self.assertEqual(client.wait(120), 0, f"{client.host}:\n{client.output}")


class CoordinatorRestart(RingFaults, unittest.TestCase):
    def test_a_restarted_coordinator_takes_over_the_ring_and_its_views_are_followed(self):
        with Cluster("rscr", WORKERS, rate=LINK_RATE) as cluster:
            for client in start_clients(cluster, elements=MIB, iterations=3):
                self.assertEqual(client.wait(60), 0, client.output)
            cluster.run("kill", "coordinator")
            cluster.run("start", "coordinator")
            # The workers rejoin, each reporting the ring it is in (generation 1): the new
            # coordinator adopts that ring unchanged, so the ring is not disturbed.
            view = await_ring(cluster, newer_than=0)
            self.assertEqual(view["generation"], 1, view)
            self.assertEqual(view["views_adopted_total"], 1, view)
            print(f"new coordinator adopted generation {view['generation']}")
            for client in start_clients(cluster, elements=MIB, iterations=3):
                self.assertEqual(client.wait(60), 0, client.output)
            # And its next view, after a lost worker, reaches every rank at once.
            self.break_the_ring(cluster, "kill", "w2")


class Lifecycle(unittest.TestCase):
    def test_interrupting_up_removes_every_namespace_and_process(self):
        cluster = Cluster("rsin")
        up = subprocess.Popen(cluster.command("up", "--bin-dir", netns_cluster.BIN_DIR,
                                              *WORKERS), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        ready = False
        lines = []
        for line in up.stdout:
            lines.append(line)
            if "ringsync-netns: ready:" in line:
                ready = True
                break
        self.assertTrue(ready, "".join(lines))
        cluster.pids = [r["pid"] for r in cluster.ps() if r["pid"]]
        self.assertEqual(len(cluster.pids), 5)
        up.send_signal(signal.SIGINT)
        rest, _ = up.communicate(timeout=60)
        self.assertEqual(up.returncode, 0, rest)
        self.assertIn("removed 6 namespaces", rest)
        cluster.down_and_check()

    def test_up_with_exit_code_from_runs_the_job_prints_its_logs_and_returns_its_status(self):
        cluster = Cluster("rsex")
        result = subprocess.run(cluster.command("up", "--bin-dir", netns_cluster.BIN_DIR,
                                                "--exit-code-from", "train0"),
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stdout[-3000:] + result.stderr)
        self.assertRegex(result.stdout, r"train0 +\| VERDICT: OK")
        self.assertIn("ringsync-netns: down: removed 10 namespaces", result.stdout)
        cluster.down_and_check()

    def test_a_killed_supervisor_takes_its_services_along_and_down_removes_the_rest(self):
        cluster = Cluster("rskv", ["coordinator", "w0"])
        cluster.__enter__()
        with open(f"/run/ringsync-netns/{cluster.project}/state.json", encoding="utf-8") as f:
            supervisor = json.load(f)["pid"]
        os.kill(supervisor, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{pid}") for pid in cluster.pids) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertFalse([p for p in cluster.pids if os.path.exists(f"/proc/{p}")],
                         "services outlived their supervisor")
        ps = cluster.run("ps", check=False)
        self.assertIn("supervisor of cluster 'rskv' is gone", ps.stderr)
        cluster.down_and_check()   # removes the namespaces the supervisor left

    def test_hosts_live_in_their_own_namespaces_and_the_root_namespace_is_untouched(self):
        before = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        with Cluster("rsis", WORKERS) as cluster:
            w1 = cluster.exec("w1", "sh", "-c", "ip -o -4 addr show eth0; ip route; "
                              "getent hosts w3 coordinator")
            self.assertEqual(w1.wait(30), 0, w1.output)
            self.assertIn("inet 198.18.0.12/24", w1.output)
            routes = [l for l in w1.output.splitlines() if "dev eth0" in l and "inet" not in l]
            self.assertEqual(routes, ["198.18.0.0/24 dev eth0 proto kernel scope link "
                                      "src 198.18.0.12 "])
            self.assertRegex(w1.output, r"198\.18\.0\.14\s+w3")
            self.assertRegex(w1.output, r"198\.18\.0\.10\s+coordinator")
            during = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
            self.assertEqual(during, before, "ringsync-netns changed the root namespace's links")

    def test_every_link_and_the_bridge_take_the_mtu_given(self):
        with Cluster("rsmt", ["coordinator", "w0", "w1"], extra=["--mtu", "9000"]) as cluster:
            w1 = cluster.exec("w1", "sh", "-c", "cat /sys/class/net/eth0/mtu; "
                              "python3 -c 'import socket; s = socket.create_connection("
                              "(\"w0\", 7401)); print(s.getsockopt(socket.IPPROTO_TCP, "
                              "socket.TCP_MAXSEG))'")
            self.assertEqual(w1.wait(30), 0, w1.output)
            mtu, mss = w1.output.split()[-2:]
            self.assertEqual(mtu, "9000")
            self.assertGreater(int(mss), 8000, "a connection to another host uses the jumbo MTU")
            bridge = subprocess.run(["ip", "-n", "rsmt--bridge", "-o", "link", "show"],
                                    capture_output=True, text=True).stdout
            self.assertEqual(re.findall(r"mtu (\d+)", bridge)[1:], ["9000"] * 4,
                             f"the bridge and its three ports:\n{bridge}")

    def test_without_root_it_says_why_it_cannot_run(self):
        result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                 "/usr/bin/python3", netns_cluster.NETNS, "-p", "rsnr", "up"],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 1)
        self.assertIn("needs root", result.stderr)


if __name__ == "__main__":
    reason = netns_cluster.skip_reason()
    if reason:
        print(f"SKIPPED: {reason}")
        sys.exit(netns_cluster.SKIP)
    unittest.main(verbosity=2)
