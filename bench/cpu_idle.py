"""How much of this machine's CPU time a benchmark left idle: near 0, what it measured was
bound by the CPU (on one machine, or on namespace hosts, which share its cores), not by
the links or the algorithm.

    before = cpu_ticks()
    ...  # the timed part
    idle_since(before)  # 0.0 .. 1.0
"""


def cpu_ticks():
    """This machine's CPU time so far, from /proc/stat: (idle, total) in ticks, iowait
    counted as idle, steal (time the hypervisor gave to others) as busy."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = ticks
    return idle + iowait, user + nice + system + idle + iowait + irq + softirq + steal


def idle_since(before):
    """The share of the machine's CPU time that was idle since cpu_ticks() gave `before`."""
    idle, total = cpu_ticks()
    return (idle - before[0]) / max(1, total - before[1])
