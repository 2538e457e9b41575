"""Talks to a running supervisor through its control socket, and reads its state file."""
import json
import os
import socket

RUN_ROOT = "/run/ringsync-netns"


class ControlError(Exception):
    pass


def run_dir(project):
    return os.path.join(RUN_ROOT, project)


def request(project, payload, timeout_s=30.0):
    path = os.path.join(run_dir(project), "control.sock")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout_s)
            connection.connect(path)
            connection.sendall((json.dumps(payload) + "\n").encode())
            data = b""
            while not data.endswith(b"\n"):
                chunk = connection.recv(65536)
                if not chunk:
                    break
                data += chunk
    except FileNotFoundError as error:
        raise ControlError(f"no cluster '{project}' is up (no {path})") from error
    except ConnectionRefusedError as error:
        raise ControlError(f"the supervisor of cluster '{project}' is gone (killed?); "
                           f"`ringsync-netns -p {project} down` removes what it left") from error
    except OSError as error:
        raise ControlError(f"cluster '{project}' did not answer: {error}") from error
    try:
        reply = json.loads(data.decode())
    except ValueError as error:
        raise ControlError(f"cluster '{project}' answered garbage: {data[:200]!r}") from error
    if not reply.get("ok"):
        raise ControlError(reply.get("error", "failed"))
    return reply


def state(project):
    path = os.path.join(run_dir(project), "state.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError as error:
        raise ControlError(f"no cluster '{project}' is up (no {path})") from error
