"""A job with MINIGLUON_PS_SECRET on a real cluster: rogue processes (real zmq DEALERs)
without the secret or with a wrong one get nothing back from the servers or the scheduler,
change nothing (no value, no optimizer, no rendezvous or barrier count, and their pickles
are never loaded), and every refusal is logged with the rogue's identity."""
from test_dist_cluster import run_job

SECRET = "security-test-secret-0123456789abcdef"
ROGUES = """
import os, pickle, zmq
from minigluon.kvstore.auth import Auth
from minigluon.kvstore.wire import Cmd, Flag, Message

MARKER = os.path.abspath('unpickled')

class Evil:                          # loading this pickle would create MARKER
    def __reduce__(self):
        return (open, (MARKER, 'w'))

kv = mx.kv.create('dist_sync')
W, r = kv.num_workers, kv.rank
kv.init(5, nd.ones((4,)))
kv.barrier()
if r == 0:
    token = kv._po.token                   # even a sniffed job token does not help
    blob = token + pickle.dumps(Evil())
    server = dict(push=Message(Cmd.PUSH, key=5, flags=Flag.SYNC, dtype=np.float32,
                               shape=(4,), version=1, offset=0, length=4,
                               payload=[np.full(4, 1000, np.float32)]),
                  pull=Message(Cmd.PULL, key=5, flags=Flag.SYNC, dtype=np.float32,
                               shape=(4,), version=0, offset=0, length=4),
                  init=Message(Cmd.INIT, key=6, flags=Flag.SYNC, dtype=np.float32,
                               shape=(1,), offset=0, length=1, payload=[np.ones(1, np.float32)]),
                  set_optimizer=Message(Cmd.SET_OPTIMIZER, payload=[blob]),
                  set_states=Message(Cmd.SET_STATES, payload=[blob]),
                  set_lr=Message(Cmd.SET_LR, payload=[np.float64(1000.0).tobytes()]))
    sched = dict(register=Message(Cmd.REGISTER, payload=[b'{"role": "worker"}']),
                 barrier=Message(Cmd.BARRIER), finalize=Message(Cmd.FINALIZE),
                 heartbeat=Message(Cmd.HEARTBEAT, key='worker', sender=1))
    ctx = zmq.Context()
    socks = []
    for name, auth in (('rogue-plain', None), ('rogue-wrong', Auth(b'not the job secret!'))):
        for address, msgs in ((kv._po.servers[0]['tcp'], server),
                              (kv._po.van.address_of('scheduler'), sched)):
            sock = ctx.socket(zmq.DEALER)
            ident = f'{name}-{len(socks)}'.encode()
            sock.setsockopt(zmq.ROUTING_ID, ident)
            sock.connect(address)
            socks.append(sock)
            for req, msg in enumerate(msgs.values(), start=1):
                msg.req, msg.sender = req, 0
                frames = msg.encode()
                if auth is not None:
                    auth.nonce = token
                    msg.flags |= Flag.AUTH
                    frames = msg.encode()
                    frames.append(auth.tag(frames, ident, True))
                sock.send_multipart(frames)
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    answers = poller.poll(1500)
    for s in socks:
        s.close(linger=0)
    ctx.term()
    assert not answers, answers
kv.barrier()                               # a rogue BARRIER did not release it early
for t in (1, 2):
    kv.push(5, nd.ones((4,)) * t)
    out = nd.zeros((4,))
    kv.pull(5, out=out)
    assert (out.asnumpy() == t * W).all(), out     # the rogue push of 1000 was not merged
assert not os.path.exists(MARKER)
report(rank=r, ok=True)
"""


def test_rogue_peers_without_the_secret_get_nothing_and_change_nothing(tmp_path):
    results, outputs = run_job(tmp_path, ROGUES, workers=2, servers=1,
                               env={"MINIGLUON_PS_SECRET": SECRET})
    assert all(r["ok"] for r in results)
    server_log, sched_log = outputs["server0"][2], outputs["scheduler"][2]
    for log, count in ((server_log, 6), (sched_log, 4)):
        for name, why in (("rogue-plain", "has no authentication tag"),
                          ("rogue-wrong", "authentication tag does not match")):
            lines = [ln for ln in log.splitlines() if f"from b'{name}-" in ln]
            assert len(lines) == count and all(why in ln for ln in lines), log
    assert "refused <SET_OPTIMIZER" in server_log and "refused <REGISTER" in sched_log
    assert "refused <SET_LR" in server_log
    assert not (tmp_path / "unpickled").exists()
