"""Training across hosts (issue 8, item 9): a scheduler, two servers and two workers, each
in a network namespace of its own, train a small model over the veths and the bridge.
Every node announces its own host's address (PS_VERBOSE=1 says which, and the
scheduler says where each registered from); pulled sums are exact; the trained parameters
are the same on both workers and those of the same steps in one process. Over a link that
loses 10% of its packets and delays each by 20 ms each way, with PS_RESEND=1, the
parameters are bit for bit those of the clean run.
"""
import re
import time

import pytest

from labjob import check_addresses, check_results, place, run_training
from netlab import Unsupported


def test_a_job_on_five_hosts_trains_over_the_network(lab, tmp_path):
    hosts = place(lab, servers=2, workers=2)
    start = time.monotonic()
    job = run_training(tmp_path, hosts)
    check_results(job)
    check_addresses(job, hosts)
    print(f"five hosts: trained in {time.monotonic() - start:.1f} s")


def test_a_lossy_slow_link_with_resend_gives_the_clean_parameters(lab, tmp_path):
    hosts = place(lab, servers=2, workers=2)
    (tmp_path / "clean").mkdir()
    (tmp_path / "lossy").mkdir()
    clean = check_results(run_training(tmp_path / "clean", hosts))
    try:
        how = lab.impair(hosts["worker1"], loss=0.10, delay_ms=20)
    except Unsupported as err:
        pytest.skip(f"cannot make a link lossy here: {err}")
    start = time.monotonic()
    job = run_training(tmp_path / "lossy", hosts, env={"PS_RESEND": "1",
                                                        "PS_RESEND_TIMEOUT": "300"})
    took = time.monotonic() - start
    assert check_results(job) == clean, f"the lossy run ({how}) trained other parameters"
    dropped, delayed = lab.counts(hosts["worker1"])
    assert dropped > 0 and delayed > 100, (dropped, delayed, how)
    resent = sum(int(n) for n in re.findall(r"resent (\d+) requests",
                                            job.err("worker0") + job.err("worker1")))
    print(f"lossy link: {how}; trained in {took:.1f} s; {dropped} packets lost, {delayed} "
          f"delayed; the workers resent {resent} requests")
