"""Bad input on a real cluster: clear errors on the worker that name the key, and servers
and a scheduler that log malformed or unknown messages and keep serving."""
from test_dist_cluster import run_job

ERRORS = """
from minigluon.base import DTypeError, ShapeError
from minigluon.kvstore import KVStoreError

def expect(exc, text, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as err:
        assert text in str(err), f'{text!r} not in {str(err)!r}'
        return str(err)
    raise AssertionError(f'{fn.__name__}{args} did not raise {exc.__name__}')

kv = mx.kv.create('dist_sync')
r = kv.rank
kv.init(3, nd.zeros((2, 3)))
expect(ShapeError, "push to key 3: shape (2, 2) does not match the initialized shape (2, 3)",
       kv.push, 3, nd.ones((2, 2)))
expect(DTypeError, "push to key 3: dtype float16 does not match the initialized dtype float32",
       kv.push, 3, nd.ones((2, 3), dtype=np.float16))
expect(ShapeError, "pull from key 3: shape (3,)", kv.pull, 3, out=nd.zeros((3,)))
expect(KVStoreError, "pull from key 'nope': the key has not been initialized; call "
       "kv.init('nope', value) first", kv.pull, 'nope', out=nd.zeros((1,)))
expect(KVStoreError, "push to key 99: the key has not been initialized", kv.push, 99,
       nd.ones((1,)))
expect(KVStoreError, "init of key 3: the key is already initialized", kv.init, 3,
       nd.zeros((2, 3)))
expect(KVStoreError, "init of key 'i': dtype bool cannot be sent", kv.init, 'i',
       nd.array(np.ones(2), dtype=np.bool_))
expect(KVStoreError, "unknown kvstore type 'dist_fast'", mx.kv.create, 'dist_fast')
expect(KVStoreError, "unknown gradient compression type '3bit'",
       kv.set_gradient_compression, {'type': '3bit'})
expect(KVStoreError, "threshold for '2bit' must be a number > 0, got 0",
       kv.set_gradient_compression, {'type': '2bit', 'threshold': 0})
expect(KVStoreError, "threshold for '2bit' must be a number > 0, got -1",
       kv.set_gradient_compression, {'type': '2bit', 'threshold': -1})
expect(KVStoreError, "set_updater", kv.set_updater, lambda k, g, w: None)
# workers disagreeing with worker 0's init get the server's answer, naming the key
shape = (2, 3) if r == 0 else (4,)
if r == 0:
    kv.init('shared', nd.zeros(shape))
else:
    expect(KVStoreError, "init of key 'shared': shape (4,)", kv.init, 'shared',
           nd.zeros(shape))
    kv.init('shared', nd.zeros((2, 3)))
# dist_async needs an optimizer, and says so for the key pushed
akv = mx.kv.create('dist_async')
akv.init('a', nd.zeros((2,)))
expect(KVStoreError, "push to key 'a': 'dist_async' applies every push with the optimizer",
       akv.push, 'a', nd.ones((2,)))
# after all that, the store still works
kv.push(3, nd.ones((2, 3)))
out = nd.zeros((2, 3))
kv.pull(3, out=out)
assert (out.asnumpy() == kv.num_workers).all(), out
report(rank=r, ok=True)
"""


def test_bad_input_errors_name_the_key(tmp_path):
    results, _ = run_job(tmp_path, ERRORS, workers=2, servers=1)
    assert all(r["ok"] for r in results)


GARBAGE = """
import struct, zmq
from minigluon.kvstore.wire import Cmd, Flag, Message

kv = mx.kv.create('dist_sync')
kv.init(5, nd.zeros((4,)))
ctx = zmq.Context()
server = ctx.socket(zmq.DEALER)
server.connect(kv._po.servers[0]['tcp'])
sched = ctx.socket(zmq.DEALER)
sched.connect(kv._po.van.address_of('scheduler'))
good = Message(Cmd.PUSH, key=5, flags=Flag.SYNC, dtype=np.float32, shape=(4,), version=1,
               offset=0, length=4, payload=[np.ones(4, np.float32)]).encode()
header = bytearray(good[0])
unknown_cmd = bytearray(header); unknown_cmd[3] = 99
bad_dtype = bytearray(header); bad_dtype[6] = 77
junk = [[b'garbage'], [b''], [bytes(unknown_cmd), good[1]], [bytes(bad_dtype), good[1]],
        [bytes(header), b'short payload'], [bytes(header)],
        [bytes(header), good[1], good[1]], [bytes(header[:-3])]]
for frames in junk:
    server.send_multipart(frames)
    sched.send_multipart(frames)
# well-formed but wrong: answered with an error, never applied
replies = []
for msg in (Message(Cmd.REGISTER, payload=[b'{}']),
            Message(Cmd.PUSH, key=404, flags=Flag.SYNC, dtype=np.float32, shape=(1,),
                    version=1, offset=0, length=1, payload=[np.ones(1, np.float32)]),
            Message(Cmd.SET_OPTIMIZER, payload=[b'x' * 16 + b'not a pickle'])):
    msg.req = 777
    server.send_multipart(msg.encode())
    assert server.poll(10000), 'no error reply'
    reply = Message.decode(server.recv_multipart())
    assert reply.cmd == Cmd.ERROR and reply.req == 777, reply
    replies.append(reply.text())
assert 'does not handle REGISTER' in replies[0], replies
assert 'PUSH from a peer that is not a worker of this job' in replies[1], replies
assert 'not a worker of this job' in replies[2], replies
server.close(); sched.close(); ctx.term()
# the real job goes on: the junk PUSH frames for key 5 were dropped, not merged
for t in (1, 2):
    kv.push(5, nd.ones((4,)) * t)
    out = nd.zeros((4,))
    kv.pull(5, out=out)
    assert (out.asnumpy() == t * kv.num_workers).all(), out
kv.barrier()
report(ok=True)
"""


def test_servers_and_scheduler_survive_garbage(tmp_path):
    results, outputs = run_job(tmp_path, GARBAGE, workers=2, servers=1)
    assert all(r["ok"] for r in results)
    server_log, sched_log = outputs["server0"][2], outputs["scheduler"][2]
    assert server_log.count("dropped a malformed message") >= 14      # 7 junk x 2 workers
    assert "unknown command 99" in server_log and "unknown dtype code 77" in server_log
    assert "payload of 13 bytes, expected 16" in server_log
    assert sched_log.count("dropped a malformed message") >= 14


INIT_OF_CODES = """
from minigluon.kvstore.postoffice import server_name
from minigluon.kvstore.wire import Cmd, Flag, Message

kv = mx.kv.create('dist_sync')
van = kv._van
# a well-formed INIT of 2-bit codes (10 values: one uint32 word), as only a push may carry
bad = Message(Cmd.INIT, key=5, store=kv._store, flags=kv._flags | Flag.COMPRESSED_2BIT,
              dtype=np.float32, shape=(10,), offset=0, length=10, threshold=0.5,
              payload=[np.full(1, 0x55555555, np.uint32)])
try:
    van.wait([van.request(server_name(0), bad, 'an init of 2-bit codes')])
    error = None
except mx.kv.KVStoreError as err:
    error = str(err)
# the server goes on serving, and kept nothing of the refused init: key 5 starts now
kv.init(5, nd.full((10,), 2))
kv.push(5, nd.ones((10,)))
out = nd.zeros((10,))
kv.pull(5, out=out)
report(error=error, out=out.asnumpy().tolist())
"""


def test_an_init_of_2bit_codes_is_refused_naming_the_key_and_the_server_goes_on(tmp_path):
    results, outputs = run_job(tmp_path, INIT_OF_CODES, workers=1, servers=1)
    error = results[0]["error"]
    assert error is not None, "the server took an INIT of 2-bit codes"
    assert "init of key 5: the INIT carries 2-bit codes (flag COMPRESSED_2BIT)" in error
    assert "send the INIT without the flag" in error
    assert results[0]["out"] == [1.0] * 10                 # the push's sum, one worker
    assert outputs["server0"][0] == 0
