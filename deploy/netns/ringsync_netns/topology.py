"""One host per compose service: its namespace, address, link, command and health check.

A host runs the service's own entrypoint, command and environment. Paths inside the
container (image binaries, volume and bind-mount targets) are rewritten to the host
paths that stand in for them wherever they appear in an argument or an environment
value, so `--socket=/run/ringsync/worker.sock` on w0 becomes a socket in w0's volume
folder, which its trainer (same volume) finds the same way. An image's configuration file
(Prometheus's --config.file) is rewritten the same way into a copy under the run
directory, so `credentials_file: /etc/prometheus/secrets/http-token` reads the host's
copy of the bind-mounted token.
"""
import dataclasses
import ipaddress
import os
import re
import shutil

from . import image as image_module

ALLOWED_SUPERNET = ipaddress.ip_network("198.18.0.0/15")  # RFC 2544 benchmarking range
FIRST_HOST_OFFSET = 10                                    # .1-.9 left for the user


class TopologyError(Exception):
    pass


@dataclasses.dataclass
class Host:
    name: str                 # the compose service name, also its host name
    netns: str
    address: str
    veth: str                 # the link's end in the bridge namespace
    argv: list
    env: dict
    cwd: str
    healthcheck: object       # compose.Healthcheck with host argv, or None
    depends_on: dict
    restart: str
    path_map: dict            # container prefix -> host path


def rewrite(text, path_map):
    """Replaces container path prefixes at path boundaries (start, '=', ':', ',', space),
    the longest prefix first, in one pass: a replacement is never rewritten again."""
    if not path_map:
        return text
    prefixes = sorted(path_map, key=len, reverse=True)
    pattern = (r"(^|[=:,\s])(" + "|".join(re.escape(p) for p in prefixes) +
               r")(?=/|$|[:,\s])")
    return re.sub(pattern, lambda m: m.group(1) + path_map[m.group(2)], text)


def _resolve_program(program, path_map, search_path, env_path):
    if "/" in program:
        host = rewrite(program, path_map)
        if not os.path.exists(host):
            raise TopologyError(f"program {program} (here {host}) does not exist")
        return host
    for directory in search_path:
        candidate = os.path.join(rewrite(directory, path_map), program)
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(program, path=env_path)
    if found is None:
        raise TopologyError(f"program '{program}' is neither in the image nor on PATH")
    return found


def _rewritten_config(arg, flag, path_map, directory):
    """arg, or when it is FLAG=PATH, FLAG=COPY: PATH's text with container paths
    rewritten, written into directory (relative paths in it would now resolve there: the
    files it names should be absolute container paths)."""
    if not arg.startswith(flag + "="):
        return arg
    source = arg[len(flag) + 1:]
    try:
        with open(source, encoding="utf-8") as f:
            text = f.read()
    except OSError as error:
        raise TopologyError(f"{flag}: cannot read {source}: {error}") from error
    os.makedirs(directory, exist_ok=True)
    copy = os.path.join(directory, os.path.basename(source))
    with open(copy, "w", encoding="utf-8") as f:
        f.write("\n".join(rewrite(line, path_map) for line in text.split("\n")))
    return f"{flag}={copy}"


def plan(services, project, subnet, repo_root, compose_dir, bin_dir, run_dir,
         project_image_name):
    network = ipaddress.ip_network(subnet)
    if not network.subnet_of(ALLOWED_SUPERNET):
        raise TopologyError(f"subnet {subnet} is outside {ALLOWED_SUPERNET}: ringsync-netns "
                            "only assigns addresses of the benchmarking range")
    addresses = list(network.hosts())[FIRST_HOST_OFFSET - 1:]
    if len(addresses) < len(services):
        raise TopologyError(f"subnet {subnet} has room for {len(addresses)} hosts, "
                            f"not {len(services)}")
    project_image = None

    def make_project_image():
        nonlocal project_image
        if project_image is None:
            project_image = image_module.project_image(repo_root, bin_dir, run_dir)
        return project_image

    hosts = []
    for index, service in enumerate(services):
        local = image_module.resolve(service, project_image_name, make_project_image)
        path_map = dict(local.path_map)
        for source, target, is_named in service.volumes:
            if is_named:
                host_path = os.path.join(run_dir, "volumes", source)
                os.makedirs(host_path, exist_ok=True)
            elif source:
                host_path = os.path.abspath(os.path.join(compose_dir, os.path.expanduser(source)))
                if not os.path.exists(host_path):
                    raise TopologyError(f"service {service.name}: bind mount source "
                                        f"{host_path} does not exist" +
                                        (" (deploy/compose-secrets.sh makes the compose "
                                         "file's credentials)" if "secrets" in source
                                         else ""))
            else:
                host_path = os.path.join(run_dir, "volumes", f"{service.name}{target}")
                os.makedirs(host_path, exist_ok=True)
            path_map[target] = host_path
        image_path = [rewrite(d, path_map) for d in local.search_path]
        env_path = ":".join(image_path + [os.environ.get("PATH", "/usr/bin:/bin")])
        env = {"PATH": env_path, "HOSTNAME": service.name,
               "LANG": os.environ.get("LANG", "C.UTF-8")}
        env.update({k: rewrite(v, path_map) for k, v in service.environment.items()})

        entrypoint = service.entrypoint if service.entrypoint is not None else local.entrypoint
        if service.entrypoint is not None:
            command = service.command or []
        else:
            command = service.command if service.command is not None else local.command
        argv = [rewrite(a, path_map) for a in entrypoint + command]
        if not argv:
            raise TopologyError(f"service {service.name}: nothing to run")
        argv[0] = _resolve_program(entrypoint[0] if entrypoint else command[0], path_map,
                                   local.search_path, env_path)
        if local.config_flag:
            argv = [_rewritten_config(a, local.config_flag, path_map,
                                      os.path.join(run_dir, "config", service.name))
                    for a in argv]

        health = service.healthcheck
        if health is not None:
            test = [rewrite(a, path_map) for a in health.test]
            try:
                test[0] = _resolve_program(health.test[0], path_map, local.search_path, env_path)
            except TopologyError as error:
                print(f"ringsync-netns: {service.name}: health check not run here ({error})")
                health = None
            else:
                health = dataclasses.replace(health, test=test)

        if local.workdir:
            cwd = rewrite(local.workdir, path_map)
        else:
            cwd = os.path.join(run_dir, "home", service.name)
        os.makedirs(cwd, exist_ok=True)
        hosts.append(Host(
            name=service.name, netns=f"{project}-{service.name}",
            address=str(addresses[index]), veth=f"veth{index}",
            argv=argv, env=env, cwd=cwd, healthcheck=health,
            depends_on=service.depends_on, restart=service.restart,
            path_map=path_map))
    return hosts
