"""DMLC_INTERFACE on hosts with two interfaces (issue 8, item 9): a server and a worker
each sit on two LANs (eth0 on the scheduler's, eth1 on another that the switch routes to).
Without DMLC_INTERFACE they announce eth0's address, the one that routes to the scheduler;
with DMLC_INTERFACE=eth1 they announce eth1's, the server listens there and the workers'
traffic to it comes in on eth1; training gives the exact results either way. An interface
the host does not have is an error that lists the ones it has.
"""
import subprocess
import sys

import pytest

from labjob import check_addresses, check_results, place, run_training
from test_dist_cluster import assert_gone, base_env

TWO_LANS = {"server0": 2, "worker1": 2}


@pytest.mark.parametrize("interface", [None, "eth1"])
def test_dmlc_interface_chooses_the_address_a_node_announces(lab, tmp_path, interface):
    hosts = place(lab, servers=1, workers=2, lans=TWO_LANS)
    chosen = {name: {"DMLC_INTERFACE": interface} for name in TWO_LANS} if interface else {}
    before = hosts["server0"].rx_bytes("eth1")
    job = run_training(tmp_path, hosts, role_env=chosen)
    came_in = hosts["server0"].rx_bytes("eth1") - before
    check_results(job)
    announced = {name: (hosts[name].addresses[interface], f"the address of "
                        f"DMLC_INTERFACE={interface}") for name in chosen}
    check_addresses(job, hosts, announced)
    print(f"DMLC_INTERFACE={interface}: {came_in} bytes came in on the server's eth1")
    if interface:          # the workers' pushes, over the switch's route to LAN 1
        assert came_in > 20000, f"only {came_in} bytes came in on the server's eth1"
    else:
        assert came_in < 5000, f"{came_in} bytes came in on the server's eth1"


def test_an_interface_the_host_lacks_is_an_error_listing_its_interfaces(lab):
    host = lab.host("w0", lans=2)
    env = base_env({"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "10.77.0.1",
                    "DMLC_PS_ROOT_PORT": "9092", "DMLC_NUM_SERVER": "1",
                    "DMLC_NUM_WORKER": "1", "DMLC_INTERFACE": "eth7"})
    proc = subprocess.Popen(host.argv(sys.executable, "-c", "import minigluon as mx; "
                                      "mx.kv.create('dist_sync')"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err
    assert "ConfigError: DMLC_INTERFACE='eth7' has no IPv4 address (" in err, err
    assert "known interfaces: lo, eth0, eth1" in err, err      # the host's, not the machine's
    assert_gone([proc.pid])
