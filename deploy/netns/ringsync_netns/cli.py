"""The ringsync-netns command line."""
import argparse
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import time

from . import compose, control, image, network, supervisor, topology

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

USAGE_EXAMPLES = """
examples:
  ringsync-netns up                       # the compose topology, logs in the foreground
  ringsync-netns up -d --rate 1gbit       # detached, every link shaped to 1 Gbit/s
  ringsync-netns up -d --mtu 9000         # jumbo frames on every link
  ringsync-netns ps
  ringsync-netns exec coordinator -- ringsyncctl status --coordinator=coordinator:7400
  ringsync-netns shape w2 --rate 100mbit --loss 1
  ringsync-netns cut w2 ; ringsync-netns restore w2
  ringsync-netns kill w2 ; ringsync-netns start w2
  ringsync-netns logs train0
  ringsync-netns down
"""


def _project(text):
    if not re.fullmatch(r"[a-z][a-z0-9]{0,15}", text):
        raise argparse.ArgumentTypeError(
            "project names are 1-16 lower-case letters and digits, starting with a letter "
            "(no '-': namespaces are named PROJECT-SERVICE)")
    return text


def _parser():
    parser = argparse.ArgumentParser(
        prog="ringsync-netns", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Runs a docker-compose topology as real hosts on this machine: one "
                    "network namespace per service, addresses in 198.18.0.0/24, a bridge in "
                    "its own namespace, links that can be shaped, cut and restored. Needs "
                    "root.",
        epilog=USAGE_EXAMPLES)
    parser.add_argument("-f", "--file", default=os.path.join(REPO_ROOT, "deploy",
                                                             "docker-compose.yml"),
                        help="compose file (default: deploy/docker-compose.yml)")
    parser.add_argument("-p", "--project", type=_project, default="ringsync",
                        help="names the namespaces PROJECT-SERVICE (default: ringsync)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = commands.add_parser("up", help="create the hosts and start the services")
    up.add_argument("services", nargs="*", help="only these (and what they depend on)")
    up.add_argument("-d", "--detach", action="store_true",
                    help="return once every service is up; `down` stops them")
    up.add_argument("--profile", action="append", default=[],
                    help="also start services of this compose profile")
    up.add_argument("--bin-dir", default=os.path.join(REPO_ROOT, "build", "bin"),
                    help="binaries that stand in for the project's image (default: build/bin)")
    up.add_argument("--subnet", default="198.18.0.0/24", help="inside 198.18.0.0/15")
    up.add_argument("--rate", help="shape every link: rate like 1gbit, 100mbit")
    up.add_argument("--loss", type=float, help="shape every link: random loss in percent")
    up.add_argument("--delay", type=float, dest="delay_ms",
                    help="shape every link: one-way delay in ms (needs the netem qdisc)")
    up.add_argument("--mtu", type=int,
                    help="every link's MTU in bytes (1280..65535; default the kernel's 1500), "
                         "e.g. 9000 for jumbo frames")
    up.add_argument("--exit-code-from", metavar="SERVICE",
                    help="stop everything when SERVICE exits and return its exit status")
    up.add_argument("--no-log-prefix", dest="print_logs", action="store_false",
                    help="do not copy the services' logs to the terminal")
    up.add_argument("--timeout", type=float, default=180.0,
                    help="seconds for every service to come up (default 180)")
    up.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)

    commands.add_parser("down", help="stop everything; remove every namespace and process")
    ps = commands.add_parser("ps", help="hosts, addresses, processes, links")
    ps.add_argument("--json", action="store_true")
    for name, text in (("kill", "SIGKILL every process of a host (restart policy ignored)"),
                       ("start", "start a host's service again"),
                       ("cut", "cut a host's link (its bridge end goes down)"),
                       ("restore", "restore a cut link")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("host")
    shape = commands.add_parser("shape", help="shape a host's link (or 'all')")
    shape.add_argument("host")
    shape.add_argument("--rate")
    shape.add_argument("--loss", type=float)
    shape.add_argument("--delay", type=float, dest="delay_ms")
    shape.add_argument("--clear", action="store_true", help="remove all shaping")
    execute = commands.add_parser(
        "exec", help="run a command on a host, with its service's environment and volumes")
    execute.add_argument("host")
    execute.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND")
    logs = commands.add_parser("logs", help="a host's service log")
    logs.add_argument("host")
    logs.add_argument("-f", "--follow", action="store_true")
    return parser


def _fail(message, status=1):
    print(f"ringsync-netns: {message}", file=sys.stderr)
    return status


def _check_shaping(args):
    """Shaping arguments are checked before anything is created."""
    if args.rate:
        network.parse_rate(args.rate)
    if args.loss is not None and not 0 < args.loss <= 100:
        raise network.NetworkError(f"--loss {args.loss}: a percentage in (0, 100]")
    if args.delay_ms is not None and args.delay_ms <= 0:
        raise network.NetworkError(f"--delay {args.delay_ms}: milliseconds, more than 0")
    network.check_mtu(getattr(args, "mtu", None))


def cmd_up(args):
    network.require_privileges()
    _check_shaping(args)
    services, compose_dir = compose.load(args.file)
    build_service = next((s for s in services if s.builds), None)
    project_image_name = build_service.image if build_service else None
    selected = compose.select(services, args.services, args.profile)
    if args.exit_code_from and args.exit_code_from not in {s.name for s in selected}:
        return _fail(f"--exit-code-from {args.exit_code_from}: not among the services")
    runnable = []
    for service in selected:
        try:
            image.resolve(service, project_image_name, lambda: None)
            runnable.append(service)
        except image.ImageError as error:
            if args.services:
                raise
            print(f"ringsync-netns: skipping {service.name}: {error}")
    leftovers = network.project_namespaces(args.project)
    if leftovers:
        try:
            control.request(args.project, {"op": "ps"}, timeout_s=2)
            return _fail(f"cluster '{args.project}' is already up (ringsync-netns -p "
                         f"{args.project} down)")
        except control.ControlError:
            print(f"ringsync-netns: removing leftovers of an earlier run: {', '.join(leftovers)}")
            network.remove_project(args.project)
    run_dir = control.run_dir(args.project)
    for part in ("image", "volumes", "home", "logs", "config"):
        shutil.rmtree(os.path.join(run_dir, part), ignore_errors=True)
    os.makedirs(run_dir, exist_ok=True)
    subnet = ipaddress.ip_network(args.subnet)
    hosts = topology.plan(runnable, args.project, args.subnet, REPO_ROOT, compose_dir,
                          os.path.abspath(args.bin_dir), run_dir, project_image_name)
    net = network.Network(args.project, hosts, subnet.prefixlen,
                          shaping={"rate": args.rate, "loss_percent": args.loss,
                                   "delay_ms": args.delay_ms},
                          mtu=args.mtu)
    if args.detach:
        # Everything above ran here, so a bad file or flag fails in the foreground; the
        # detached supervisor plans again from the same arguments.
        return _detach(args, run_dir)
    runner = supervisor.Supervisor(args.project, hosts, net, run_dir,
                                   print_logs=args.print_logs,
                                   exit_code_from=args.exit_code_from,
                                   startup_timeout_s=args.timeout)
    return runner.run(exit_with_parent=args.exit_with_parent)


def _detach(args, run_dir):
    argv = [sys.executable, os.path.abspath(sys.argv[0])] + [
        a for a in sys.argv[1:] if a not in ("-d", "--detach")]
    log_path = os.path.join(run_dir, "supervisor.log")
    with open(log_path, "wb") as log:
        child = subprocess.Popen(argv + ["--no-log-prefix"], stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + args.timeout + 30
    while time.monotonic() < deadline:
        if child.poll() is not None:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                sys.stderr.write(f.read()[-4000:])
            return _fail(f"the cluster did not come up (exit status {child.returncode})")
        try:
            if control.request(args.project, {"op": "ps"}, timeout_s=2).get("ready"):
                print(f"ringsync-netns: cluster '{args.project}' is up (supervisor pid "
                      f"{child.pid}, log {log_path})")
                return 0
        except control.ControlError:
            pass
        time.sleep(0.3)
    child.terminate()
    return _fail("the cluster did not come up in time")


def cmd_down(args):
    try:
        pid = control.state(args.project)["pid"]
        control.request(args.project, {"op": "down"})
        deadline = time.monotonic() + supervisor.STOP_GRACE_S + 30
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
            time.sleep(0.1)
    except control.ControlError:
        pass
    removed = network.remove_project(args.project)
    for leftover in ("state.json", "control.sock"):
        try:
            os.unlink(os.path.join(control.run_dir(args.project), leftover))
        except FileNotFoundError:
            pass
    if removed:
        print(f"ringsync-netns: removed leftover namespaces: {', '.join(removed)}")
    print(f"ringsync-netns: cluster '{args.project}' is down")
    return 0


def cmd_ps(args):
    reply = control.request(args.project, {"op": "ps"})
    if args.json:
        print(json.dumps(reply["hosts"], indent=1))
        return 0
    print(f"{'HOST':<12} {'ADDRESS':<15} {'PID':>7} {'STATUS':<10} {'EXIT':>4} "
          f"{'LINK':<5} SHAPING")
    for row in reply["hosts"]:
        shaping = " ".join(f"{k}={v}" for k, v in row["shaping"].items()) or "-"
        print(f"{row['host']:<12} {row['address']:<15} {row['pid'] or '-':>7} "
              f"{row['status']:<10} {'' if row['exit_code'] is None else row['exit_code']:>4} "
              f"{row['link']:<5} {shaping}")
    return 0


def cmd_simple(args):
    payload = {"op": args.command, "host": args.host}
    if args.command == "shape":
        if not (args.clear or args.rate or args.loss or args.delay_ms):
            return _fail("shape: give --rate, --loss, --delay or --clear")
        if not args.clear:
            _check_shaping(args)
            payload.update(rate=args.rate, loss=args.loss, delay_ms=args.delay_ms)
    control.request(args.project, payload)
    print(f"ringsync-netns: {args.command} {args.host}: done")
    return 0


def cmd_exec(args):
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        return _fail("exec: give a command after --")
    state = control.state(args.project)
    host = next((h for h in state["hosts"] if h["name"] == args.host), None)
    if host is None:
        return _fail(f"no host '{args.host}'")
    argv = [topology.rewrite(a, host["path_map"]) for a in argv]
    program = shutil.which(argv[0], path=host["env"]["PATH"]) if "/" not in argv[0] else argv[0]
    if program is None:
        return _fail(f"exec: '{argv[0]}' not found on {args.host}")
    # Replace this process: the caller's PID (and signals) reach the command itself.
    os.chdir(host["cwd"])
    ip = shutil.which("ip")
    os.execve(ip, [ip, "netns", "exec", host["netns"], program] + argv[1:], dict(host["env"]))


def cmd_logs(args):
    path = os.path.join(control.run_dir(args.project), "logs", f"{args.host}.log")
    if not os.path.exists(path):
        return _fail(f"no log for '{args.host}' ({path})")
    if not args.follow:
        with open(path, "rb") as f:
            sys.stdout.buffer.write(f.read())
        return 0
    return subprocess.call(["tail", "-n", "+1", "-f", path])


def main(argv=None):
    args = _parser().parse_args(argv)
    handlers = {"up": cmd_up, "down": cmd_down, "ps": cmd_ps, "exec": cmd_exec,
                "logs": cmd_logs}
    try:
        if args.command in ("up", "down", "exec", "kill", "start", "cut", "restore", "shape"):
            network.require_privileges()
        return handlers.get(args.command, cmd_simple)(args)
    except (compose.ComposeError, image.ImageError, topology.TopologyError,
            network.NetworkError, control.ControlError) as error:
        return _fail(str(error))
    except KeyboardInterrupt:
        return 130
