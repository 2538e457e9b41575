"""What a compose image means on this host, where there is no Docker engine.

The project's image (the one a service builds from the root Dockerfile) is the build
folder's binaries laid out as the Dockerfile lays them out: /opt/ringsync/bin holds the
binaries and ringsync-healthcheck (deploy/healthcheck.sh), the entrypoint is the
Dockerfile's ENTRYPOINT. Prometheus's image is Debian's prometheus program; its
configuration file names container paths too (credentials_file), so the host runs a copy
with those rewritten (config_flag). Any other image has no local equivalent and its
service cannot run here.
"""
import dataclasses
import json
import os
import re
import shutil


class ImageError(Exception):
    """An image this runner cannot stand in for, or a missing build."""


@dataclasses.dataclass
class LocalImage:
    entrypoint: list          # the image's ENTRYPOINT, container paths
    command: list             # the image's CMD
    path_map: dict            # container path prefix -> host path
    search_path: list         # container directories on the image's PATH
    workdir: str | None       # container working directory
    # The flag naming a configuration file whose container paths the host must see
    # rewritten (e.g. "--config.file"), or None.
    config_flag: str | None = None


PROJECT_BIN = "/opt/ringsync/bin"


def _dockerfile_instruction(dockerfile, name):
    """The last `NAME [..json..]` of the final stage, parsed."""
    value = None
    with open(dockerfile, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    for line in text.splitlines():
        if re.match(r"\s*FROM\s", line, re.IGNORECASE):
            value = None  # a new stage: what earlier stages said does not carry over
        match = re.match(rf"\s*{name}\s+(.*)$", line, re.IGNORECASE)
        if match:
            value = match.group(1).strip()
    if value is None:
        return None
    if value.startswith("["):
        return json.loads(value)
    return ["sh", "-c", value] if name.upper() != "WORKDIR" else value


def project_image(repo_root, bin_dir, run_dir):
    """The root Dockerfile's image, assembled from bin_dir under run_dir/image/bin."""
    dockerfile = os.path.join(repo_root, "Dockerfile")
    if not os.path.isfile(os.path.join(bin_dir, "ringsyncd")):
        raise ImageError(f"{bin_dir}/ringsyncd not found: build first (make build)")
    image_bin = os.path.join(run_dir, "image", "bin")
    os.makedirs(image_bin, exist_ok=True)
    links = {name: os.path.join(bin_dir, name) for name in os.listdir(bin_dir)}
    links["ringsync-healthcheck"] = os.path.join(repo_root, "deploy", "healthcheck.sh")
    for name, target in links.items():
        link = os.path.join(image_bin, name)
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(target), link)
    return LocalImage(
        entrypoint=_dockerfile_instruction(dockerfile, "ENTRYPOINT") or [],
        command=_dockerfile_instruction(dockerfile, "CMD") or [],
        path_map={PROJECT_BIN: image_bin},
        search_path=[PROJECT_BIN],
        workdir=None)


def prometheus_image():
    program = shutil.which("prometheus")
    if program is None:
        raise ImageError("the prometheus image needs Debian's prometheus program "
                         "(deploy/install-deps.sh installs it)")
    return LocalImage(
        entrypoint=["/bin/prometheus"],
        command=["--config.file=/etc/prometheus/prometheus.yml",
                 "--storage.tsdb.path=/prometheus"],
        path_map={"/bin/prometheus": program},
        search_path=[],
        workdir="/prometheus",
        config_flag="--config.file")


def resolve(service, project_image_name, make_project_image):
    """The LocalImage of a compose service."""
    if service.builds or service.image == project_image_name:
        return make_project_image()
    if re.match(r"^(docker\.io/)?prom/prometheus(:|$)", service.image):
        return prometheus_image()
    raise ImageError(f"service {service.name}: image '{service.image}' has no local "
                     "equivalent on this host")
