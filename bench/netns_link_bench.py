#!/usr/bin/env python3
"""ringsync across hosts: four workers in network namespaces (ringsync-netns, the compose
topology), every link shaped to RATE each way (tc tbf), one ringsync-bench per worker; the
busbw per size as a share of the link rate, the median over ROUNDS fresh clusters per
rate. The ring's bound is busbw = the link rate (TCP/IP headers take ~5% of it); the
same clusters also time plain TCP around the same ring (each host streams 2(N-1)/N x S
bytes to the next over one socket while reading as many from the previous, once to warm
the connection and once timed: the wire's ceiling for a ring), reported as busbw the same
way, and, where BIN_DIR has gloo-peer-bench (libgloo-dev), Gloo C++ running the same
collective (--collective= among --bench-flags, all-reduce by default; gloo::allreduce,
gloo::alltoall, ... over its TCP transport, one rank per host, plain buffers): the peer.
The last column, CPU idle, is the share of this machine's CPU time left idle while
ringsync's benchmark ran (and Gloo's): the four hosts share its cores, so near 0 the
result was bound by the CPU, not by the links.

  sudo bench/netns_link_bench.py [--rates 1gbit,2500mbit] [--rounds 3] [--bin-dir build/bin]
      [--min-bytes 16M] [--max-bytes 64M] [--subnet 198.18.7.0/24] [--security tls,token]
      [--bench-flags=--registered] [--show-transport] [--mtu 9000]

--security: how the daemons authenticate, each in its own clusters, alternating within a
round: tls is the compose file as it is (mutual TLS on the Join channel and the peer
ports, so every byte of the ring is encrypted: the streams by gRPC's TLS, the data
connections beside them sealed with AES-256-GCM); token is the same file with the cluster
token alone (--token_file: authenticated, not encrypted, as Gloo's and MPI's TCP
transports are neither).

--mtu: every link's MTU (default the kernel's 1500). At 1500 a TCP stream's payload is at
most 1448 of every 1514 bytes the shaped link carries, 0.956 of its rate, whatever the
sender; jumbo frames (9000, as many cluster networks run) raise that to 0.993.

Needs root (network namespaces). Every namespace and process it starts is removed at the
end of each round, also on failure.
"""
import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cluster"))

from cpu_idle import cpu_ticks, idle_since  # noqa: E402  (beside this file)

RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g)bit$")


def bytes_per_second(rate):
    match = RATE.match(rate)
    if not match:
        raise SystemExit(f"--rates: '{rate}' is not like 1gbit or 2500mbit")
    scale = {"k": 1e3, "m": 1e6, "g": 1e9}[match.group(2)]
    return float(match.group(1)) * scale / 8


# Plain TCP around the ring, run on every host: listen, connect to the next host, then
# send and receive `bytes` at once; prints the seconds both took.
TCP_RING = r"""
import socket, sys, threading, time
port, next_host, total = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", port)); server.listen(1)
out = None
deadline = time.time() + 30
while out is None:
    try:
        out = socket.create_connection((next_host, port), timeout=2)
    except OSError:
        if time.time() > deadline: raise
        time.sleep(0.1)
inbound, _ = server.accept()
out.settimeout(None); inbound.settimeout(None)
out.sendall(b"g"); inbound.recv(1)  # the previous host is connected too: go
block = memoryview(bytes(1 << 20))
into = memoryview(bytearray(1 << 20))
def send(n):
    while n:
        k = min(n, len(block)); out.sendall(block[:k]); n -= k
def exchange(n):
    sender = threading.Thread(target=send, args=(n,)); sender.start()
    got = 0
    while got < n:
        k = inbound.recv_into(into, min(len(into), n - got))
        if not k: raise SystemExit("previous host closed early")
        got += k
    sender.join()
exchange(total)  # warm: past TCP's slow start, as the workers' streams are
start = time.time()
exchange(total)
print(time.time() - start)
"""


def tcp_ring_busbw(cluster, size):
    """busbw of plain TCP around the ring for an all-reduce of `size` bytes."""
    wire = size * 2 * 3 // 4
    runs = [cluster.exec(f"w{rank}", "/usr/bin/python3", "-c", TCP_RING, "7777",
                         f"w{(rank + 1) % 4}", str(wire)) for rank in range(4)]
    seconds = []
    for run in runs:
        if run.wait(600) != 0:
            raise SystemExit(f"{run.host}: the TCP ring failed:\n{run.output}")
        seconds.append(float(run.output.split()[-1]))
    return size / max(seconds) * 1.5 / 1e9


def gloo_rows(cluster, args):
    """Gloo C++ on the same hosts (the workers idle beside it): rows as bench_rows's, and
    the CPU idle share while it ran."""
    import netns_cluster
    store = tempfile.mkdtemp(prefix="ringsync-netns-gloo-")
    try:
        before = cpu_ticks()
        ranks = [cluster.exec(f"w{rank}", os.path.join(os.environ["RINGSYNC_BIN_DIR"],
                                                        "gloo-peer-bench"),
                              "--nranks=4", f"--rank={rank}", f"--hostname=w{rank}",
                              f"--store_dir={store}", f"--collective={args.collective}",
                              f"--min_bytes={args.min_bytes}",
                              f"--max_bytes={args.max_bytes}", "--step_factor=4",
                              f"--iters={args.iters}", "--warmup_iters=2")
                 for rank in range(4)]
        for rank in ranks:
            if rank.wait(1800) != 0:
                raise SystemExit(f"{rank.host}: gloo-peer-bench failed:\n{rank.output}")
        return netns_cluster.bench_rows(ranks[0].output), idle_since(before)
    finally:
        shutil.rmtree(store, ignore_errors=True)


def one_round(netns_cluster, rate, args, round_number, compose_file):
    project = f"rslb{round_number}"
    services = ["coordinator", "w0", "w1", "w2", "w3"]
    extra = ["--subnet", args.subnet] + (["--mtu", str(args.mtu)] if args.mtu else [])
    with netns_cluster.Cluster(project, services, rate=rate, extra=extra,
                               compose_file=compose_file) as cluster:
        before = cpu_ticks()
        benches = [cluster.exec(f"w{rank}", "ringsync-bench",
                                "--worker=unix:/run/ringsync/worker.sock",
                                f"--min_bytes={args.min_bytes}", f"--max_bytes={args.max_bytes}",
                                "--step_factor=4", f"--iters={args.iters}", "--warmup_iters=2",
                                *args.bench_flags.split())
                   for rank in range(4)]
        for bench in benches:
            if bench.wait(1800) != 0:
                raise SystemExit(f"{bench.host}: ringsync-bench failed:\n{bench.output}")
        idle = idle_since(before)
        if args.show_transport:
            for rank in range(4):
                for line in cluster.log(f"w{rank}").splitlines():
                    if "data connection" in line or "slot ring" in line:
                        print(f"# w{rank}: {line.strip()}")
        rows = netns_cluster.bench_rows(benches[0].output)
        gloo, gloo_idle = gloo_rows(cluster, args) if args.gloo else ({}, None)
        for size, row in rows.items():
            row["idle"], row["gloo_idle"] = idle, gloo_idle
            row["tcp_busbw"] = tcp_ring_busbw(cluster, size)
            row["gloo_busbw"] = gloo[size]["busbw"] if size in gloo else None
            if size in gloo and gloo[size]["wrong"]:
                raise SystemExit(f"Gloo C++ got {gloo[size]['wrong']} wrong at {size} B")
        return rows


def collective_of(bench_flags):
    """The collective --bench-flags gives ringsync-bench (--collective=X or --collective X),
    which the peer must run too: its busbw is that collective's."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--collective", default="allreduce")
    known, _ = parser.parse_known_args(bench_flags.split())
    return known.collective


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1gbit,2500mbit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bin-dir", default=os.path.join(HERE, "..", "build", "bin"))
    parser.add_argument("--min-bytes", default="16M")
    parser.add_argument("--max-bytes", default="64M")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--bench-flags", default="",
                        help="more ringsync-bench flags, e.g. --registered (no SDK copies)")
    parser.add_argument("--show-transport", action="store_true",
                        help="print each worker's log lines that say how its frames travel")
    parser.add_argument("--subnet", default="198.18.7.0/24")
    parser.add_argument("--mtu", type=int, help="every link's MTU (default 1500), e.g. 9000")
    parser.add_argument("--security", default="tls,token",
                        help="comma-separated: tls (the compose file's mutual TLS), token")
    args = parser.parse_args()
    args.collective = collective_of(args.bench_flags)
    securities = args.security.split(",")
    if not securities or any(s not in ("tls", "token") for s in securities):
        raise SystemExit(f"--security: '{args.security}' is not a list of tls and token")
    os.environ["RINGSYNC_BIN_DIR"] = os.path.abspath(args.bin_dir)
    args.gloo = os.access(os.path.join(args.bin_dir, "gloo-peer-bench"), os.X_OK)
    if not args.gloo:
        print(f"# no {args.bin_dir}/gloo-peer-bench (install libgloo-dev and rebuild): "
              "no Gloo C++ columns")
    import netns_cluster  # reads RINGSYNC_BIN_DIR
    reason = netns_cluster.skip_reason()
    if reason:
        raise SystemExit(f"cannot run: {reason}")
    compose_files = {"tls": None, "token": netns_cluster.token_only_compose() if "token" in securities else None}
    print(f"# ringsync across 4 namespace hosts, N=4, {args.collective}, float32 sum; "
          "busbw median over "
          f"{args.rounds} fresh clusters per rate and security (alternating); #wrong summed "
          f"over the rounds; MTU {args.mtu or 1500}")
    print(f"# {'security':>8} {'rate':>9} {'size (B)':>12} {'time (us)':>12} {'busbw GB/s':>11} "
          f"{'of link':>8} {'#wrong':>7} {'TCP ring busbw':>15} {'of link':>8} {'ringsync/TCP':>13}"
          f" {'Gloo C++ busbw':>15} {'of link':>8} {'ringsync/Gloo':>14} {'CPU idle':>13}")
    failed = False
    for rate in args.rates.split(","):
        link = bytes_per_second(rate) / 1e9
        rounds = {security: [] for security in securities}
        for r in range(args.rounds):
            for security in securities:
                rounds[security].append(
                    one_round(netns_cluster, rate, args, r, compose_files[security]))
        for security in securities:
            runs = rounds[security]
            for size in sorted(runs[0]):
                busbw = statistics.median(r[size]["busbw"] for r in runs)
                time_us = statistics.median(r[size]["time_us"] for r in runs)
                wrong = sum(r[size]["wrong"] for r in runs)
                tcp = statistics.median(r[size]["tcp_busbw"] for r in runs)
                idle = statistics.median(r[size]["idle"] for r in runs)
                failed |= wrong != 0
                gloo = ""
                if args.gloo:
                    g = statistics.median(r[size]["gloo_busbw"] for r in runs)
                    g_idle = statistics.median(r[size]["gloo_idle"] for r in runs)
                    idles = f"{idle:.2f} / {g_idle:.2f}"
                    gloo = f" {g:>15.3f} {g / link:>8.2f} {busbw / g:>14.2f} {idles:>13}"
                else:
                    gloo = f" {'':>15} {'':>8} {'':>14} {idle:>13.2f}"
                print(f"  {security:>8} {rate:>9} {size:>12} {time_us:>12.1f} {busbw:>11.3f} "
                      f"{busbw / link:>8.2f} {wrong:>7} {tcp:>15.3f} {tcp / link:>8.2f} "
                      f"{busbw / tcp:>13.2f}{gloo}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
