#!/usr/bin/python3
"""Unit tests of the pure parts of ringsync_netns: compose, topology, network, image.

No root, no network namespaces, no processes: only files under temporary directories.

    /usr/bin/python3 deploy/netns/ringsync_netns_test.py
"""
import os
import shutil
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from ringsync_netns import compose, image, network, topology  # noqa: E402

DEPLOY_DIR = os.path.normpath(os.path.join(HERE, ".."))
REPO_ROOT = os.path.normpath(os.path.join(DEPLOY_DIR, ".."))
COMPOSE_FILE = os.path.join(os.path.dirname(__file__), "..", "docker-compose.yml")


def make_temp_dir(test):
    directory = tempfile.TemporaryDirectory(prefix="ringsync_netns_test.")
    test.addCleanup(directory.cleanup)
    return directory.name


def write_compose(test, text, env_file=None):
    """Writes text (dedented) as docker-compose.yml in a fresh directory, with an
    optional .env beside it; returns the compose file's path."""
    directory = make_temp_dir(test)
    path = os.path.join(directory, "docker-compose.yml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(text))
    if env_file is not None:
        with open(os.path.join(directory, ".env"), "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(env_file))
    return path


def load_one(test, service_yaml, environ=None, env_file=None):
    """Loads a file with the single service `app` given as YAML (indented under it)."""
    text = "services:\n  app:\n" + textwrap.indent(textwrap.dedent(service_yaml), "    ")
    services, _ = compose.load(write_compose(test, text, env_file),
                               environ={} if environ is None else environ)
    test.assertEqual([s.name for s in services], ["app"])
    return services[0]


def names(services):
    return [s.name for s in services]


# --------------------------------------------------------------------------- compose
class ComposeTest(unittest.TestCase):

    # ----- interpolation
    def test_colon_dash_default_applies_when_variable_is_unset_or_empty(self):
        spec = "image: ${IMG:-fallback}\n"
        self.assertEqual(load_one(self, spec).image, "fallback")
        self.assertEqual(load_one(self, spec, environ={"IMG": ""}).image, "fallback")
        self.assertEqual(load_one(self, spec, environ={"IMG": "mine"}).image, "mine")

    def test_dash_default_applies_only_when_variable_is_unset(self):
        spec = "image: x\nenvironment: {V: \"${V-fallback}\"}\n"
        self.assertEqual(load_one(self, spec).environment["V"], "fallback")
        self.assertEqual(load_one(self, spec, environ={"V": ""}).environment["V"], "")
        self.assertEqual(load_one(self, spec, environ={"V": "set"}).environment["V"], "set")

    def test_colon_question_mark_raises_with_the_message_when_unset_or_empty(self):
        spec = "image: ${IMG:?set IMG to the image to run}\n"
        for environ in ({}, {"IMG": ""}):
            with self.assertRaises(compose.ComposeError) as caught:
                load_one(self, spec, environ=environ)
            self.assertIn("IMG", str(caught.exception))
            self.assertIn("set IMG to the image to run", str(caught.exception))
        self.assertEqual(load_one(self, spec, environ={"IMG": "ok"}).image, "ok")

    def test_double_dollar_is_a_literal_dollar(self):
        service = load_one(self, "image: x\ncommand: [\"echo\", \"$$HOME\", \"$${X}\"]\n",
                           environ={"HOME": "/root", "X": "y"})
        self.assertEqual(service.command, ["echo", "$HOME", "${X}"])

    def test_plain_variables_are_interpolated_and_unset_ones_are_empty(self):
        service = load_one(self, "image: x\ncommand: [\"$A\", \"${B}\", \"<${UNSET}>\"]\n",
                           environ={"A": "a", "B": "b"})
        self.assertEqual(service.command, ["a", "b", "<>"])

    def test_environ_argument_beats_the_env_file_beside_the_compose_file(self):
        env_file = """\
            # comment
            IMG=from-env-file
            TAG="quoted"
            """
        spec = "image: ${IMG:-default}:${TAG:-latest}\n"
        self.assertEqual(load_one(self, spec, env_file=env_file).image,
                         "from-env-file:quoted")
        self.assertEqual(load_one(self, spec, environ={"IMG": "from-environ"},
                                  env_file=env_file).image,
                         "from-environ:quoted")

    # ----- YAML
    def test_anchors_and_merge_keys_are_resolved(self):
        path = write_compose(self, """\
            x-base: &base
              image: base:1
              restart: always
              environment: {A: "1"}
            services:
              one:
                <<: *base
              two:
                <<: *base
                restart: "no"
            """)
        one, two = compose.load(path, environ={})[0]
        self.assertEqual((one.image, one.restart, one.environment), ("base:1", "always", {"A": "1"}))
        self.assertEqual((two.image, two.restart), ("base:1", "no"))

    def test_load_returns_the_compose_file_directory(self):
        path = write_compose(self, "services: {app: {image: x}}\n")
        _, directory = compose.load(path, environ={})
        self.assertEqual(directory, os.path.dirname(os.path.abspath(path)))

    # ----- command, entrypoint, environment
    def test_command_and_entrypoint_lists_stay_argv_and_numbers_become_strings(self):
        service = load_one(self, "image: x\nentrypoint: [\"/bin/prog\", \"-v\"]\n"
                                 "command: [\"--port\", 7400]\n")
        self.assertEqual(service.entrypoint, ["/bin/prog", "-v"])
        self.assertEqual(service.command, ["--port", "7400"])

    def test_command_and_entrypoint_strings_run_through_sh_c(self):
        service = load_one(self, "image: x\nentrypoint: \"exec prog\"\ncommand: \"echo hi && true\"\n")
        self.assertEqual(service.entrypoint, ["sh", "-c", "exec prog"])
        self.assertEqual(service.command, ["sh", "-c", "echo hi && true"])

    def test_absent_command_and_entrypoint_mean_the_images_own(self):
        service = load_one(self, "image: x\n")
        self.assertIsNone(service.entrypoint)
        self.assertIsNone(service.command)

    def test_environment_as_a_mapping(self):
        service = load_one(self, "image: x\nenvironment: {A: one, N: 3, E: \"\"}\n")
        self.assertEqual(service.environment, {"A": "one", "N": "3", "E": ""})

    def test_a_name_without_a_value_passes_this_machines_value_or_nothing(self):
        service = load_one(self, "image: x\nenvironment: {HOME_DIR: , UNSET: }\n",
                           environ={"HOME_DIR": "/home/me"})
        self.assertEqual(service.environment, {"HOME_DIR": "/home/me"})
        service = load_one(self, "image: x\nenvironment: [\"HOME_DIR\", \"UNSET\"]\n",
                           environ={"HOME_DIR": "/home/me"})
        self.assertEqual(service.environment, {"HOME_DIR": "/home/me"})

    def test_environment_as_a_list_of_name_equals_value(self):
        service = load_one(self, "image: x\nenvironment: [\"A=one\", \"B=x=y\", \"C=\"]\n")
        self.assertEqual(service.environment, {"A": "one", "B": "x=y", "C": ""})

    # ----- health checks and durations
    def test_healthcheck_cmd_is_an_argv_with_parsed_durations(self):
        service = load_one(self, """\
            image: x
            healthcheck:
              test: ["CMD", "probe", "--port", "7400"]
              interval: 5s
              timeout: 1m30s
              retries: 7
              start_period: 500ms
            """)
        self.assertEqual(service.healthcheck, compose.Healthcheck(
            test=["probe", "--port", "7400"], interval_s=5.0, timeout_s=90.0,
            retries=7, start_period_s=0.5))

    def test_healthcheck_defaults_are_30s_30s_3_retries_0s(self):
        health = load_one(self, "image: x\nhealthcheck: {test: [\"CMD\", \"probe\"]}\n").healthcheck
        self.assertEqual((health.interval_s, health.timeout_s, health.retries,
                          health.start_period_s), (30.0, 30.0, 3, 0.0))

    def test_healthcheck_cmd_shell_runs_through_sh_c(self):
        health = load_one(self, "image: x\nhealthcheck: {test: [\"CMD-SHELL\", \"curl -f x || exit 1\"]}\n"
                          ).healthcheck
        self.assertEqual(health.test, ["sh", "-c", "curl -f x || exit 1"])

    def test_healthcheck_string_runs_through_sh_c(self):
        health = load_one(self, "image: x\nhealthcheck: {test: \"curl -f x\"}\n").healthcheck
        self.assertEqual(health.test, ["sh", "-c", "curl -f x"])

    def test_healthcheck_disable_true_or_none_means_no_healthcheck(self):
        self.assertIsNone(load_one(self, "image: x\nhealthcheck: {disable: true}\n").healthcheck)
        self.assertIsNone(load_one(self, "image: x\nhealthcheck: {test: [\"NONE\"]}\n").healthcheck)
        self.assertIsNone(load_one(self, "image: x\n").healthcheck)

    def test_durations_add_up_their_parts(self):
        self.assertEqual(compose.parse_duration("5s", "f"), 5.0)
        self.assertEqual(compose.parse_duration("1m30s", "f"), 90.0)
        self.assertEqual(compose.parse_duration("500ms", "f"), 0.5)
        self.assertEqual(compose.parse_duration("1h2m", "f"), 3720.0)
        self.assertAlmostEqual(compose.parse_duration("1.5s", "f"), 1.5)

    def test_a_bad_duration_raises_naming_the_field(self):
        with self.assertRaises(compose.ComposeError) as caught:
            load_one(self, "image: x\nhealthcheck: {test: [\"CMD\", \"p\"], interval: 5 parsecs}\n")
        self.assertIn("services.app.healthcheck.interval", str(caught.exception))
        self.assertIn("5 parsecs", str(caught.exception))
        for bad in ("", "5", "s", "5s junk", "-5s"):
            with self.subTest(duration=bad), self.assertRaises(compose.ComposeError):
                compose.parse_duration(bad, "f")

    # ----- errors
    def test_a_named_volume_not_declared_under_volumes_is_an_error(self):
        with self.assertRaises(compose.ComposeError) as caught:
            load_one(self, "image: x\nvolumes: [\"data:/var/lib/data\"]\n")
        self.assertIn("data", str(caught.exception))

    def test_declared_named_volumes_bind_mounts_and_anonymous_volumes_are_told_apart(self):
        path = write_compose(self, """\
            services:
              app:
                image: x
                volumes: ["data:/data", "./conf:/etc/conf:ro", "/cache"]
            volumes:
              data:
            """)
        service = compose.load(path, environ={})[0][0]
        self.assertEqual(service.volumes, [("data", "/data", True),
                                           ("./conf", "/etc/conf", False),
                                           ("", "/cache", False)])

    def test_depends_on_an_unknown_service_is_an_error(self):
        path = write_compose(self, "services:\n  app: {image: x, depends_on: [db]}\n")
        with self.assertRaises(compose.ComposeError) as caught:
            compose.load(path, environ={})
        self.assertIn("db", str(caught.exception))

    def test_depends_on_list_form_means_service_started(self):
        path = write_compose(self, "services:\n  db: {image: x}\n"
                                   "  app: {image: x, depends_on: [db]}\n")
        app = compose.load(path, environ={})[0][1]
        self.assertEqual(app.depends_on, {"db": "service_started"})

    def test_an_upper_case_service_name_is_an_error(self):
        path = write_compose(self, "services:\n  Web: {image: x}\n")
        with self.assertRaises(compose.ComposeError) as caught:
            compose.load(path, environ={})
        self.assertIn("Web", str(caught.exception))

    def test_a_file_without_services_is_an_error(self):
        path = write_compose(self, "version: \"2.4\"\nvolumes: {data: }\n")
        with self.assertRaises(compose.ComposeError):
            compose.load(path, environ={})

    def test_a_missing_file_is_an_error(self):
        with self.assertRaises(compose.ComposeError):
            compose.load(os.path.join(make_temp_dir(self), "absent.yml"), environ={})

    # ----- select
    def _profiled_services(self):
        path = write_compose(self, """\
            services:
              db:    {image: x}
              cache: {image: x, depends_on: [db]}
              app:   {image: x, depends_on: [cache]}
              other: {image: x}
              debug: {image: x, profiles: [tools], depends_on: [other]}
            """)
        return compose.load(path, environ={})[0]

    def test_select_by_default_leaves_out_services_with_an_inactive_profile(self):
        self.assertEqual(names(compose.select(self._profiled_services())),
                         ["db", "cache", "app", "other"])

    def test_select_with_a_profile_includes_its_services(self):
        self.assertEqual(names(compose.select(self._profiled_services(), profiles=["tools"])),
                         ["db", "cache", "app", "other", "debug"])

    def test_select_a_named_service_pulls_in_its_dependencies_transitively_in_file_order(self):
        self.assertEqual(names(compose.select(self._profiled_services(), names=["app"])),
                         ["db", "cache", "app"])
        self.assertEqual(names(compose.select(self._profiled_services(), names=["debug"])),
                         ["other", "debug"])

    def test_select_an_unknown_service_is_an_error(self):
        with self.assertRaises(compose.ComposeError) as caught:
            compose.select(self._profiled_services(), names=["nope"])
        self.assertIn("nope", str(caught.exception))

    # ----- the project's own compose file
    def test_real_compose_file_lists_its_services_in_file_order(self):
        services, directory = compose.load(COMPOSE_FILE, environ={})
        self.assertEqual(names(services), ["coordinator", "w0", "w1", "w2", "w3",
                                           "train0", "train1", "train2", "train3",
                                           "prometheus"])
        self.assertEqual(directory, DEPLOY_DIR)

    def test_real_compose_file_puts_prometheus_under_the_monitoring_profile(self):
        services = {s.name: s for s in compose.load(COMPOSE_FILE, environ={})[0]}
        self.assertEqual(services["prometheus"].profiles, ["monitoring"])
        self.assertNotIn("prometheus", names(compose.select(list(services.values()))))

    def test_real_compose_file_gives_each_worker_its_id_through_the_environment(self):
        services = {s.name: s for s in compose.load(COMPOSE_FILE, environ={})[0]}
        self.assertEqual(services["w2"].environment["FLAGS_worker_id"], "w2")
        self.assertEqual(services["w2"].environment["FLAGS_advertise_host"], "w2")

    def test_real_compose_file_starts_each_trainer_after_its_worker_is_healthy(self):
        services = {s.name: s for s in compose.load(COMPOSE_FILE, environ={})[0]}
        self.assertEqual(services["train1"].depends_on, {"w1": "service_healthy"})
        self.assertEqual(services["train1"].entrypoint, ["ringsync-train-example"])
        self.assertIsNone(services["train1"].healthcheck)

    def test_real_compose_file_interpolates_its_defaults(self):
        services = {s.name: s for s in compose.load(COMPOSE_FILE, environ={})[0]}
        w0 = services["w0"]
        self.assertIn("--segment_bytes=1048576", w0.command)
        self.assertIn("--log_level=info", w0.command)
        self.assertEqual(w0.image, "ringsync:dev")
        self.assertTrue(services["coordinator"].builds)
        self.assertEqual(w0.healthcheck.test, ["/opt/ringsync/bin/ringsync-healthcheck"])
        self.assertEqual(w0.healthcheck.interval_s, 5.0)

    def test_real_compose_file_takes_settings_from_the_environ(self):
        services = {s.name: s for s in compose.load(
            COMPOSE_FILE, environ={"RINGSYNC_SEGMENT_BYTES": "4096"})[0]}
        self.assertIn("--segment_bytes=4096", services["w3"].command)


# --------------------------------------------------------------------------- topology
class TopologyTest(unittest.TestCase):

    # ----- rewrite
    def test_rewrite_replaces_a_prefix_at_the_start(self):
        path_map = {"/run/ringsync": "/H"}
        self.assertEqual(topology.rewrite("/run/ringsync/worker.sock", path_map), "/H/worker.sock")
        self.assertEqual(topology.rewrite("/run/ringsync", path_map), "/H")

    def test_rewrite_replaces_a_prefix_after_equals_colon_comma_and_whitespace(self):
        path_map = {"/run/ringsync": "/H"}
        self.assertEqual(topology.rewrite("--socket=/run/ringsync/w.sock", path_map),
                         "--socket=/H/w.sock")
        self.assertEqual(topology.rewrite("unix:/run/ringsync/w.sock", path_map),
                         "unix:/H/w.sock")
        self.assertEqual(topology.rewrite("/a,/run/ringsync/x,/run/ringsync", path_map),
                         "/a,/H/x,/H")
        self.assertEqual(topology.rewrite("ls /run/ringsync\t/run/ringsync/x", path_map),
                         "ls /H\t/H/x")
        self.assertEqual(topology.rewrite("/run/ringsync:/run/ringsync/x", path_map),
                         "/H:/H/x")

    def test_rewrite_only_replaces_at_path_boundaries(self):
        path_map = {"/run/ringsync": "/H"}
        for text in ("/run/ringsync2", "/run/ringsync2/x", "/x/run/ringsync",
                     "--socket=/x/run/ringsync/w.sock", "/run/ringsync-netns/p",
                     "a/run/ringsync"):
            with self.subTest(text=text):
                self.assertEqual(topology.rewrite(text, path_map), text)

    def test_rewrite_longest_prefix_wins(self):
        path_map = {"/opt/a": "/HA", "/opt/a/b": "/HB"}
        self.assertEqual(topology.rewrite("/opt/a/b/c", path_map), "/HB/c")
        self.assertEqual(topology.rewrite("/opt/a/c", path_map), "/HA/c")
        self.assertEqual(topology.rewrite("/opt/a/bc", path_map), "/HA/bc")
        self.assertEqual(topology.rewrite("x=/opt/a/b:/opt/a", path_map), "x=/HB:/HA")

    # One pass: a host path put in for a longer prefix is not scanned again for a shorter
    # one (a volume at /tmp with the run dir under /tmp once broke plan()).
    def test_rewrite_does_not_rewrite_a_replacement_again(self):
        path_map = {"/opt/ringsync/bin": "/tmp/rs/image/bin",
                    "/tmp": "/tmp/rs/volumes/app/tmp"}
        self.assertEqual(topology.rewrite("/opt/ringsync/bin/ringsyncd", path_map),
                         "/tmp/rs/image/bin/ringsyncd")

    # ----- plan
    def _plan(self, subnet="198.18.0.0/24", services=None, profiles=()):
        run_dir = make_temp_dir(self)
        bin_dir = make_temp_dir(self)
        for name in ("ringsyncd", "ringsync-train-example", "ringsyncctl"):
            path = os.path.join(bin_dir, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write("#!/bin/sh\nexit 0\n")
            os.chmod(path, 0o755)
        if services is None:
            # The credentials' bind mounts (deploy/compose-secrets.sh's directories).
            secrets = make_temp_dir(self)
            for name in ("coordinator", "w0", "w1", "w2", "w3", "prometheus"):
                os.makedirs(os.path.join(secrets, name))
            services = compose.select(
                compose.load(COMPOSE_FILE, environ={"RINGSYNC_SECRETS_DIR": secrets})[0],
                profiles=profiles)
        hosts = topology.plan(services, "rstest", subnet, REPO_ROOT, DEPLOY_DIR,
                              bin_dir, run_dir, "ringsync:dev")
        return {h.name: h for h in hosts}, run_dir

    def test_plan_gives_addresses_from_the_tenth_on_in_file_order(self):
        hosts, _ = self._plan()
        self.assertEqual(list(hosts), ["coordinator", "w0", "w1", "w2", "w3",
                                       "train0", "train1", "train2", "train3"])
        self.assertEqual([h.address for h in hosts.values()],
                         [f"198.18.0.{10 + i}" for i in range(9)])
        self.assertEqual([h.veth for h in hosts.values()], [f"veth{i}" for i in range(9)])

    def test_plan_names_namespaces_after_project_and_service(self):
        hosts, _ = self._plan()
        self.assertEqual(hosts["w0"].netns, "rstest-w0")
        self.assertEqual(hosts["train3"].netns, "rstest-train3")
        self.assertEqual(hosts["coordinator"].netns, "rstest-coordinator")

    def test_plan_runs_the_images_entrypoint_with_container_paths_rewritten(self):
        hosts, run_dir = self._plan()
        w0 = hosts["w0"]
        self.assertEqual(w0.argv[0], os.path.join(run_dir, "image", "bin", "ringsyncd"))
        self.assertEqual(w0.argv[1], "worker")
        socket = os.path.join(run_dir, "volumes", "w0-socket", "worker.sock")
        self.assertIn(f"--socket={socket}", w0.argv)
        self.assertTrue(os.path.isdir(os.path.join(run_dir, "volumes", "w0-socket")))
        self.assertEqual(w0.env["FLAGS_worker_id"], "w0")
        self.assertEqual(w0.env["HOSTNAME"], "w0")
        self.assertTrue(w0.env["PATH"].startswith(os.path.join(run_dir, "image", "bin") + ":"))
        self.assertEqual(hosts["coordinator"].argv[:2],
                         [os.path.join(run_dir, "image", "bin", "ringsyncd"), "coordinator"])

    def test_plan_points_each_trainer_at_its_workers_socket(self):
        hosts, run_dir = self._plan()
        train0 = hosts["train0"]
        self.assertEqual(train0.argv[0],
                         os.path.join(run_dir, "image", "bin", "ringsync-train-example"))
        socket = os.path.join(run_dir, "volumes", "w0-socket", "worker.sock")
        self.assertIn(f"--worker=unix:{socket}", train0.argv)
        self.assertIn(f"--socket={socket}", hosts["w0"].argv)
        self.assertIsNone(train0.healthcheck)
        self.assertEqual(train0.depends_on, {"w0": "service_healthy"})

    def test_plan_runs_the_images_healthcheck_script(self):
        hosts, run_dir = self._plan()
        link = os.path.join(run_dir, "image", "bin", "ringsync-healthcheck")
        self.assertEqual(hosts["w0"].healthcheck.test[0], link)
        self.assertTrue(os.path.islink(link))
        self.assertEqual(os.path.realpath(link),
                         os.path.realpath(os.path.join(DEPLOY_DIR, "healthcheck.sh")))

    def test_plan_mounts_each_daemons_own_credentials(self):
        hosts, _ = self._plan()
        w2 = hosts["w2"]
        secrets = w2.path_map["/run/secrets/ringsync"]
        self.assertEqual(os.path.basename(secrets), "w2")
        self.assertIn(f"--tls_cert={secrets}/tls.pem", w2.argv)
        self.assertIn(f"--http_token_file={secrets}/http-token", w2.argv)
        self.assertNotIn("--insecure", w2.argv)

    def test_plan_runs_prometheus_on_a_copy_of_its_config_with_paths_rewritten(self):
        if shutil.which("prometheus") is None:
            self.skipTest("no prometheus program here")
        hosts, run_dir = self._plan(profiles=["monitoring"])
        prometheus = hosts["prometheus"]
        copy = os.path.join(run_dir, "config", "prometheus", "prometheus.yml")
        self.assertIn(f"--config.file={copy}", prometheus.argv)
        with open(copy, encoding="utf-8") as f:
            text = f.read()
        token = os.path.join(prometheus.path_map["/etc/prometheus/secrets"], "http-token")
        self.assertIn(f"credentials_file: {token}}}", text)
        self.assertNotIn("/etc/prometheus/secrets", text)

    def test_plan_gives_each_host_a_working_directory_of_its_own(self):
        hosts, run_dir = self._plan()
        self.assertEqual(hosts["w1"].cwd, os.path.join(run_dir, "home", "w1"))
        self.assertTrue(os.path.isdir(hosts["w1"].cwd))

    def test_plan_refuses_a_subnet_outside_the_benchmarking_range(self):
        with self.assertRaises(topology.TopologyError) as caught:
            self._plan(subnet="10.0.0.0/24")
        self.assertIn("10.0.0.0/24", str(caught.exception))

    def test_plan_refuses_a_subnet_too_small_for_the_services(self):
        with self.assertRaises(topology.TopologyError) as caught:
            self._plan(subnet="198.18.0.0/29")
        self.assertIn("198.18.0.0/29", str(caught.exception))


# --------------------------------------------------------------------------- network
class NetworkTest(unittest.TestCase):

    def test_parse_rate_reads_bits_per_second(self):
        self.assertEqual(network.parse_rate("1gbit"), 1e9)
        self.assertEqual(network.parse_rate("100mbit"), 1e8)
        self.assertEqual(network.parse_rate("500kbit"), 5e5)
        self.assertEqual(network.parse_rate("1.5Gbit/s"), 1.5e9)

    def test_parse_rate_reads_bytes_as_tc_does(self):
        self.assertEqual(network.parse_rate("125MB/s"), 1e9)
        self.assertEqual(network.parse_rate("125mbps"), 1e9)  # tc: bps = bytes per second
        self.assertEqual(network.parse_rate("125MBps"), 1e9)

    def test_parse_rate_returns_an_int(self):
        self.assertIsInstance(network.parse_rate("1.5Gbit/s"), int)

    def test_parse_rate_rejects_what_is_not_a_rate(self):
        for bad in ("fast", "1 parsec", "0bit", "-1gbit", "", "1kbit"):
            with self.subTest(rate=bad), self.assertRaises(network.NetworkError):
                network.parse_rate(bad)

    def test_an_mtu_is_one_every_link_takes_and_ipv6_still_works_on(self):
        for good in (None, 1280, 1500, 9000, 65535):
            network.check_mtu(good)
        for bad in (0, 576, 1279, 65536):
            with self.subTest(mtu=bad), self.assertRaisesRegex(network.NetworkError,
                                                               r"--mtu .*1280\.\.65535"):
                network.check_mtu(bad)


# --------------------------------------------------------------------------- image
class ImageTest(unittest.TestCase):

    def test_project_image_needs_ringsyncd_in_bin_dir(self):
        bin_dir = make_temp_dir(self)
        with self.assertRaises(image.ImageError) as caught:
            image.project_image(REPO_ROOT, bin_dir, make_temp_dir(self))
        self.assertIn("ringsyncd", str(caught.exception))

    def test_project_image_takes_the_real_dockerfiles_entrypoint_and_cmd(self):
        bin_dir = make_temp_dir(self)
        open(os.path.join(bin_dir, "ringsyncd"), "w").close()
        run_dir = make_temp_dir(self)
        local = image.project_image(REPO_ROOT, bin_dir, run_dir)
        self.assertEqual(local.entrypoint, ["/opt/ringsync/bin/ringsyncd"])
        self.assertEqual(local.command, ["--help"])
        self.assertEqual(local.path_map, {"/opt/ringsync/bin": os.path.join(run_dir, "image", "bin")})
        self.assertEqual(local.search_path, ["/opt/ringsync/bin"])
        self.assertEqual(os.path.realpath(os.path.join(run_dir, "image", "bin", "ringsyncd")),
                         os.path.realpath(os.path.join(bin_dir, "ringsyncd")))

    # Only the final stage's ENTRYPOINT and CMD make the image's.
    def test_project_image_ignores_instructions_of_earlier_stages(self):
        repo_root = make_temp_dir(self)
        with open(os.path.join(repo_root, "Dockerfile"), "w", encoding="utf-8") as f:
            f.write('FROM debian AS build\nCMD ["make"]\n'
                    'FROM debian AS runtime\nENTRYPOINT ["/opt/ringsync/bin/ringsyncd"]\n')
        bin_dir = make_temp_dir(self)
        open(os.path.join(bin_dir, "ringsyncd"), "w").close()
        local = image.project_image(repo_root, bin_dir, make_temp_dir(self))
        self.assertEqual(local.entrypoint, ["/opt/ringsync/bin/ringsyncd"])
        self.assertEqual(local.command, [])

    def test_resolve_maps_built_and_project_named_services_to_the_project_image(self):
        services = {s.name: s for s in compose.load(COMPOSE_FILE, environ={})[0]}
        marker = object()
        self.assertIs(image.resolve(services["coordinator"], "ringsync:dev", lambda: marker), marker)
        self.assertIs(image.resolve(services["w0"], "ringsync:dev", lambda: marker), marker)

    def test_resolve_refuses_an_image_with_no_local_equivalent(self):
        service = load_one(self, "image: redis:7\n")
        with self.assertRaises(image.ImageError) as caught:
            image.resolve(service, "ringsync:dev", lambda: None)
        self.assertIn("redis:7", str(caught.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
