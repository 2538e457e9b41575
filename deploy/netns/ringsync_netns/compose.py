"""Reads a docker-compose file the way docker-compose does, for the parts ringsync uses.

YAML anchors and merge keys come from the YAML loader; ${VAR}, ${VAR:-default},
${VAR-default}, ${VAR:?message} and $$ are interpolated from the environment, then from
the .env file beside the compose file. Services come back in file order, with profiles,
so that `up` starts what `docker-compose up` would.
"""
import dataclasses
import os
import re

import yaml


class ComposeError(Exception):
    """The compose file cannot be read or uses something this runner cannot honour."""


@dataclasses.dataclass
class Healthcheck:
    test: list            # argv (CMD) or ["sh", "-c", line] (CMD-SHELL)
    interval_s: float
    timeout_s: float
    retries: int
    start_period_s: float


@dataclasses.dataclass
class Service:
    name: str
    image: str
    builds: bool                      # has a build: section (the project's Dockerfile)
    entrypoint: list | None           # None: the image's own
    command: list | None              # None: the image's own
    environment: dict
    volumes: list                     # (source, target, is_named_volume)
    healthcheck: Healthcheck | None
    depends_on: dict                  # service -> condition
    restart: str
    profiles: list


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text, what):
    """Compose durations: '5s', '1m30s', '500ms'."""
    text = str(text).strip()
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ComposeError(f"{what}: '{text}' is not a duration like 5s or 1m30s")
    return total


def _read_env_file(path):
    values = {}
    if not os.path.exists(path):
        return values
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise ComposeError(f"{path}:{number}: expected NAME=value")
            name, value = line.split("=", 1)
            values[name.strip()] = value.strip().strip("'\"")
    return values


_VARIABLE = re.compile(r"\$(?:\$|\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _interpolate(value, lookup, where):
    if isinstance(value, dict):
        return {k: _interpolate(v, lookup, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, lookup, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(match):
        if match.group(0) == "$$":
            return "$"
        body = match.group(1) if match.group(1) is not None else match.group(2)
        for separator in (":-", "-", ":?", "?"):
            name, found, argument = body.partition(separator)
            if found and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                current = lookup(name)
                empty = current is None or (separator.startswith(":") and current == "")
                if separator.endswith("-"):
                    return argument if empty else current
                if empty:
                    raise ComposeError(f"{where}: {name} is required: {argument}")
                return current
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", body):
            raise ComposeError(f"{where}: cannot interpolate '${{{body}}}'")
        return lookup(body) or ""

    return _VARIABLE.sub(replace, value)


def _as_argv(value, where):
    if value is None:
        return None
    if isinstance(value, str):
        return ["sh", "-c", value]
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v) for v in value]
    raise ComposeError(f"{where}: expected a list of strings or a string")


def _environment(value, where, environ):
    """A NAME without a value passes this machine's NAME through, or nothing, as in compose."""
    if value is None:
        return {}
    if isinstance(value, dict):
        items = [(str(k), None if v is None else str(v)) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(str(i).partition("=")[0], str(i).partition("=")[2] if "=" in str(i) else None)
                 for i in value]
    else:
        items = None
    if items is not None:
        return {k: environ[k] if v is None else v for k, v in items
                if v is not None or k in environ}
    raise ComposeError(f"{where}: expected a mapping or a list of NAME=value")


def _healthcheck(value, where):
    if not value or value.get("disable") or value.get("test") in (["NONE"], "NONE"):
        return None
    test = value.get("test")
    if isinstance(test, str):
        argv = ["sh", "-c", test]
    elif isinstance(test, list) and test and test[0] == "CMD":
        argv = [str(v) for v in test[1:]]
    elif isinstance(test, list) and test and test[0] == "CMD-SHELL":
        argv = ["sh", "-c", " ".join(str(v) for v in test[1:])]
    else:
        raise ComposeError(f"{where}.test: expected CMD, CMD-SHELL or a string")
    return Healthcheck(
        test=argv,
        interval_s=parse_duration(value.get("interval", "30s"), f"{where}.interval"),
        timeout_s=parse_duration(value.get("timeout", "30s"), f"{where}.timeout"),
        retries=int(value.get("retries", 3)),
        start_period_s=parse_duration(value.get("start_period", "0s"), f"{where}.start_period"))


def _volumes(value, named, where):
    mounts = []
    for item in value or []:
        if isinstance(item, dict):
            source, target = item.get("source", ""), item.get("target", "")
        else:
            parts = str(item).split(":")
            if len(parts) == 1:
                source, target = "", parts[0]
            else:
                source, target = parts[0], parts[1]
        if not target.startswith("/"):
            raise ComposeError(f"{where}: mount target '{target}' is not an absolute path")
        is_named = bool(source) and not source.startswith((".", "/", "~"))
        if is_named and source not in named:
            raise ComposeError(f"{where}: volume '{source}' is not declared under volumes:")
        mounts.append((source, target, is_named))
    return mounts


def _depends_on(value, services, where):
    if value is None:
        return {}
    if isinstance(value, list):
        value = {name: {"condition": "service_started"} for name in value}
    result = {}
    for name, spec in value.items():
        if name not in services:
            raise ComposeError(f"{where}: depends on unknown service '{name}'")
        condition = (spec or {}).get("condition", "service_started")
        if condition not in ("service_started", "service_healthy",
                             "service_completed_successfully"):
            raise ComposeError(f"{where}: unknown condition '{condition}'")
        result[name] = condition
    return result


def load(path, environ=None):
    """Returns (services in file order, compose file directory)."""
    path = os.path.abspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            document = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as error:
        raise ComposeError(f"{path}: {error}") from error
    if not isinstance(document, dict) or not isinstance(document.get("services"), dict):
        raise ComposeError(f"{path}: no services: mapping")
    directory = os.path.dirname(path)
    environ = dict(os.environ if environ is None else environ)
    env_file = _read_env_file(os.path.join(directory, ".env"))

    def lookup(name):
        return environ.get(name, env_file.get(name))

    document = _interpolate(document, lookup, os.path.basename(path))
    named = set((document.get("volumes") or {}).keys())
    raw = document["services"]
    services = []
    for name, spec in raw.items():
        where = f"services.{name}"
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name):
            raise ComposeError(f"{where}: service names must be lower-case host names")
        if "image" not in spec and "build" not in spec:
            raise ComposeError(f"{where}: needs image: or build:")
        services.append(Service(
            name=name,
            image=str(spec.get("image", "")),
            builds="build" in spec,
            entrypoint=_as_argv(spec.get("entrypoint"), f"{where}.entrypoint"),
            command=_as_argv(spec.get("command"), f"{where}.command"),
            environment=_environment(spec.get("environment"), f"{where}.environment", environ),
            volumes=_volumes(spec.get("volumes"), named, f"{where}.volumes"),
            healthcheck=_healthcheck(spec.get("healthcheck"), f"{where}.healthcheck"),
            depends_on=_depends_on(spec.get("depends_on"), raw, f"{where}.depends_on"),
            restart=str(spec.get("restart", "no")),
            profiles=[str(p) for p in spec.get("profiles") or []]))
    return services, directory


def select(services, names=(), profiles=()):
    """The services `docker-compose up NAMES` starts: the named ones (or every service
    without an inactive profile) plus everything they depend on, in file order."""
    by_name = {s.name: s for s in services}
    for name in names:
        if name not in by_name:
            raise ComposeError(f"no service '{name}' (services: {', '.join(by_name)})")
    wanted = set(names) or {s.name for s in services
                            if not s.profiles or set(s.profiles) & set(profiles)}
    pending = list(wanted)
    while pending:
        for dependency in by_name[pending.pop()].depends_on:
            if dependency not in wanted:
                wanted.add(dependency)
                pending.append(dependency)
    return [s for s in services if s.name in wanted]
