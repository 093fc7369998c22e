"""Emulated hosts joined by shaped links: tests/realhosts's namespaces (netlab.Lab), each
host's link to the switch limited by `tc ... tbf` on both of its ends, plus `netem`
delay where the kernel has it.

    lab = netlab.Lab("mgdl4242-0")
    hosts = place(lab, servers=1, workers=2)          # {'scheduler': Host, ...}
    shaped = shape(lab, hosts.values(), parse_rate("1gbit"), latency_ms=0.1)
    bytes_now = counters(lab)                         # {host name: (tx, rx) bytes}
    dropped = drops(lab, hosts.values())              # packets tbf dropped so far
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REALHOSTS = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "realhosts"))
sys.path.insert(0, REALHOSTS)
import netlab  # noqa: E402  (the namespaces of tests/realhosts, one implementation)

PREFIX = "mgdl"             # our namespaces: PREFIX<pid>-<n>-<host>, never another's
BURST_S = 0.001             # tbf's bucket: 1 ms at the link's rate (at least 32 KiB)
QUEUE_MS = 50               # tbf's queue: packets waiting longer are dropped
PROBE = os.path.join(HERE, "linkprobe.py")
UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def parse_rate(text):
    """'1gbit' -> 1e9 bits per second; ValueError naming the value otherwise."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(kbit|mbit|gbit)", text.strip().lower())
    if not match:
        raise ValueError(f"link rate {text!r} is not a number followed by kbit, mbit or "
                         "gbit (e.g. 1gbit, 10gbit, 100mbit)")
    return float(match.group(1)) * UNITS[match.group(2)]


def why_not_here(tag, tc="tc"):
    """Why this machine cannot emulate shaped links (a sentence), or None: root, `ip`,
    namespaces (netlab's checks), then `tc` and the kernel's sch_tbf."""
    why = netlab.why_not_here(tag)
    if why:
        return why
    if shutil.which(tc) is None:
        return (f"needs iproute2's `tc` to shape links; {tc!r} is not an executable "
                "(apt-get install iproute2, or give --tc PATH)")
    probe = f"{tag}-tbf"
    netlab.ip("netns", "add", probe)
    try:
        netlab.tc("-n", probe, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "1gbit",
                  "burst", "32kb", "latency", "50ms", binary=tc)
    except (RuntimeError, OSError) as err:
        return f"the kernel cannot shape links with tbf (CONFIG_NET_SCH_TBF): {err}"
    finally:
        netlab.ip("netns", "delete", probe)
    return None


def shape(lab, hosts, rate, latency_ms=0.0, tc="tc"):
    """Limit each host's link to `rate` bits/s both ways (tbf on both ends) and, where the
    kernel has netem, delay it so a packet takes `latency_ms` more from host to host (half
    on each of the two links it crosses). A dict saying what was set."""
    burst = max(32 * 1024, int(rate / 8 * BURST_S))
    delay = netlab.netem_available(lab.tag) and latency_ms > 0
    for host in hosts:
        for netns, dev in lab.link_ends(host):
            netlab.tc("-n", netns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf",
                      "rate", f"{rate:.0f}bit", "burst", str(burst), "latency",
                      f"{QUEUE_MS}ms", binary=tc)
            if delay:         # each end holds a packet half the latency: two per path
                netlab.tc("-n", netns, "qdisc", "add", "dev", dev, "parent", "1:1",
                          "handle", "10:", "netem", "delay", f"{latency_ms / 4:g}ms",
                          binary=tc)
    return {"tbf": f"rate {rate:.0f}bit burst {burst} latency {QUEUE_MS}ms, both ends of "
                   "each host's link",
            "netem": (f"delay {latency_ms / 4:g}ms on each end: {latency_ms:g} ms host to "
                      "host" if delay else
                      "not applied: " + ("no latency asked" if latency_ms <= 0 else
                                         "the kernel has no sch_netem (CONFIG_NET_SCH_NETEM)"))}


def counters(lab):
    """{host name: (bytes sent, bytes received)} on each host's link, read at the switch's
    end (what it received the host sent), all in one `ip` call."""
    links = json.loads(netlab.ip("-n", lab.switch, "-s", "-j", "link", "show"))
    found = {}
    for link in links:
        name = link["ifname"]
        if name.endswith("-0"):               # netlab's plug of a host's eth0
            stats = link["stats64"]
            found[name[:-2]] = (stats["rx"]["bytes"], stats["tx"]["bytes"])
    return found


def drops(lab, hosts, tc="tc"):
    """Packets the links' tbf qdiscs have dropped so far (both ends of every host's link):
    a drop costs TCP a retransmission, at worst a 200 ms timeout."""
    total = 0
    for netns in [lab.switch] + [host.netns for host in hosts]:
        qdiscs = json.loads(netlab.tc("-n", netns, "-s", "-j", "qdisc", "show", binary=tc))
        total += sum(q.get("drops", 0) for q in qdiscs if q.get("kind") == "tbf")
    return total


def measure_link(a, b, nbytes, port=5399, within=60):
    """{'rtt_ms', 'gbit'} from host `a` to host `b` (linkprobe.py at both ends, each ended
    by PID)."""
    server = subprocess.Popen(b.argv(sys.executable, PROBE, "serve", str(port)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL)
    try:
        if netlab.first_line(server, within) != "ready":
            raise RuntimeError(f"linkprobe.py serve on {b.name} failed: "
                               f"{server.communicate(timeout=5)[1].strip()}")
        out = a.run(sys.executable, PROBE, "probe", b.address, str(port), str(nbytes),
                    timeout=within)
        return json.loads(out)
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate()
