"""ringsync-netns: a docker-compose topology run as network namespaces on one Linux host.

Layers, each in its own module:
  compose     reads the compose file as docker-compose would (anchors, ${VAR} defaults)
  image       what an image means on this host (its entrypoint and binaries)
  topology    one host per service: namespace, address, argv, env, paths, health check
  network     namespaces, the bridge, veth links, shaping (tc, nftables), cuts
  supervisor  starts, watches, restarts and stops the services; answers control requests
  control     talks to a running supervisor
  cli         the ringsync-netns command
"""
