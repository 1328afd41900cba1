#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the fuzz targets into corpus/<target>/seed-*.

Each seed is a realistic input: a host list as a user types it, a discovery script's answer,
the variables chorusrun sets for a worker, a negotiation round of a small job. Targets that
read their input through libFuzzer's FuzzedDataProvider get it encoded the way that class
decodes it (FDP below), value by value in the order the target consumes them (each target's
file comment describes its input). Seeds only have to be good starting points: any bytes are a
valid input, so a seed that drifts from its target's order still runs.

The regression inputs of bugs found (corpus/<target>/regress-*) are not made here.
Usage: make_seeds.py [CORPUS_DIR] (default: corpus/ next to this script); rewrites only seed-*
files.
"""
import os
import struct
import sys

# ---------------------------------------------------------------------------------------------
# FuzzedDataProvider, encoding side.
# ---------------------------------------------------------------------------------------------


class FDP:
    """Builds bytes that FuzzedDataProvider (LLVM 14) decodes to the values given, in order.

    Strings are read from the front, integers (and bools, probabilities) from the back.
    """

    def __init__(self):
        self.front = bytearray()
        self.back = bytearray()  # in the order the values are consumed

    def int_in_range(self, lo, hi, value, bits=64):
        assert lo <= value <= hi, (lo, value, hi)
        span = (hi - lo) % (1 << 64)
        offset = (value - lo) % (1 << 64)
        n = 0
        while n * 8 < bits and (span >> (8 * n)) > 0:
            n += 1
        # The first byte consumed is the most significant one.
        self.back += offset.to_bytes(n, 'big') if n else b''
        return self

    def integral(self, value, bits, signed=True):
        lo = -(1 << (bits - 1)) if signed else 0
        hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
        return self.int_in_range(lo, hi, value, bits)

    def boolean(self, value):
        return self.int_in_range(0, 255, 1 if value else 0, 8)

    def probability(self, p):
        """ConsumeProbability<float>: a uint32 scaled to [0, 1]."""
        return self.integral(min(int(p * 0xFFFFFFFF), 0xFFFFFFFF), 32, signed=False)

    def string(self, text, max_length):
        data = text.encode() if isinstance(text, str) else bytes(text)
        assert len(data) <= max_length
        for b in data:
            self.front += b'\\\\' if b == 0x5C else bytes([b])
        if len(data) < max_length:
            self.front += b'\\\n'  # a backslash and any other byte end the string
        return self

    def bytes(self):
        return bytes(self.front) + bytes(reversed(self.back))


# ---------------------------------------------------------------------------------------------
# Protobuf, encoding side (enough for proto/negotiation.proto).
# ---------------------------------------------------------------------------------------------


def varint(n):
    n %= 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, value):
    if isinstance(value, bool):
        return varint(number << 3) + varint(int(value))
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, float):
        return varint((number << 3) | 1) + struct.pack('<d', value)
    data = value.encode() if isinstance(value, str) else value
    return varint((number << 3) | 2) + varint(len(data)) + data


def packed(number, values):
    return field(number, b''.join(varint(v) for v in values))


def request(name, type_=0, dtype=7, shape=(), reduce_op=0, root=0, device=-1, process_set=0,
            group_key='', group_size=0, splits=(), rank=0):
    m = field(1, rank) + field(2, type_) + field(3, name) + field(4, dtype)
    if shape:
        m += packed(5, shape)
    m += field(6, reduce_op) + field(7, 1.0) + field(8, 1.0) + field(9, root) + field(10, device)
    m += field(11, process_set)
    if group_key:
        m += field(12, group_key) + field(13, group_size)
    if splits:
        m += packed(14, splits)
    return m


def response(names, shapes, type_=0, dtype=7, first_dims=()):
    m = field(1, type_)
    for n in names:
        m += field(2, n)
    m += field(3, dtype) + field(4, 0) + field(5, 1.0) + field(6, 1.0) + field(8, -1)
    m += packed(10, [len(s) for s in shapes]) + packed(11, [d for s in shapes for d in s])
    if first_dims:
        m += packed(12, first_dims)
    return m


# ---------------------------------------------------------------------------------------------
# The seeds, by target.
# ---------------------------------------------------------------------------------------------


def hosts():
    return {
        'dash-H': b'host1:2,host2:4',
        'localhost': b'localhost:8',
        'hostfile': b'# the cluster\nnode-01.example.com slots=4\nnode-02.example.com slots=4\n'
                    b'10.0.0.7\tslots=2\ngpu_node_3\n',
        'crlf-hostfile': b'a slots=1\r\nb slots=2\r\n',
    }


def slurm():
    # flag byte (bit 0: SLURM_NODELIST, bit 1: no SLURM_TASKS_PER_NODE, bit 2: no SLURM_NTASKS),
    # then node list, tasks per node, task count separated by NULs.
    return {
        'ranges': b'\x00node[01-03,07],gpu5\x002(x3),1,1\x007',
        'two-brackets': b'\x02rack[1-2]-n[01-02]\x00\x004',
        'ntasks-only': b'\x03cn[08-10]\x00\x008',
        'one-per-node': b'\x06a,b,c\x00\x00',
    }


def discovery():
    def run(fdp, code=0, signaled=False, timed_out=False, stop=None, chunks=()):
        fdp.boolean(signaled).integral(code, 32).probability(0.5 if not timed_out else 0.0)
        if stop is None:
            fdp.probability(0.5)
        else:
            fdp.probability(0.0).integral(stop, 32)
        fdp.int_in_range(0, 8, len(chunks), 32)
        for is_stdout, text in chunks:
            fdp.boolean(is_stdout).string(text, 4096).probability(0.5)

    seeds = {}
    f = FDP().int_in_range(1, 1000000, 2, 32)
    run(f, chunks=[(True, 'host1:4\nhost2\n'), (True, 'host3:2\n')])
    seeds['answer'] = f.bytes()
    f = FDP().int_in_range(1, 1000000, 1, 32)
    run(f, chunks=[(True, 'h1:2\n')])
    run(f, code=1, chunks=[(False, 'ssh: connect to host h9: Connection refused\n')])
    run(f, chunks=[(True, 'h1:2\nh1:4\n\n  h2  \n')])
    seeds['fail-then-answer'] = f.bytes()
    f = FDP().int_in_range(1, 1000000, 8, 32)
    run(f, timed_out=True, chunks=[(True, 'partial')])
    run(f, signaled=True, code=9)
    run(f, stop=15)
    seeds['timeout-kill-signal'] = f.bytes()
    f = FDP().int_in_range(1, 1000000, 1, 32)
    run(f, chunks=[(True, 'good:1\nbad host\n')])
    seeds['malformed'] = f.bytes()
    return seeds


CONFIG_NAMES = [
    "CHORUS_FUZZION_THRESHOLD", "CHORUS_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD",
    "CHORUS_CYCLE_TIME_MS", "HOROVOD_CYCLE_TIME", "CHORUS_CACHE_CAPACITY",
    "HOROVOD_CACHE_CAPACITY", "CHORUS_PIPELINE_CHUNK_BYTES", "CHORUS_INPLACE_MIN_BYTES",
    "CHORUS_HUGE_PAGES", "CHORUS_NUM_NCCL_STREAMS", "HOROVOD_NUM_NCCL_STREAMS",
    "CHORUS_GPU_OP_TIMEOUT_SECONDS", "CHORUS_STALL_CHECK_TIME_SECONDS",
    "HOROVOD_STALL_CHECK_TIME_SECONDS", "CHORUS_STALL_SHUTDOWN_TIME_SECONDS",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "CHORUS_STALL_CHECK_DISABLE",
    "HOROVOD_STALL_CHECK_DISABLE", "CHORUS_IDLE_CYCLE_MS", "CHORUS_NO_PROGRESS_TIMEOUT_SECONDS",
    "CHORUS_LOG_LEVEL", "HOROVOD_LOG_LEVEL", "CHORUS_PRINT_CONFIG", "CHORUS_TIMELINE",
    "HOROVOD_TIMELINE", "CHORUS_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES",
    "CHORUS_TIMELINE_ALL_RANKS", "CHORUS_TIMELINE_MAX_MB", "CHORUS_TIMELINE_QUEUE_EVENTS",
    "CHORUS_TIMELINE_START_CYCLE", "CHORUS_TIMELINE_STOP_CYCLE", "CHORUS_CONTROLLER",
    "CHORUS_RENDEZVOUS_ADDR", "CHORUS_RENDEZVOUS_SECRET", "CHORUS_RENDEZVOUS_SCOPE",
    "CHORUS_START_TIMEOUT_SECONDS", "HOROVOD_START_TIMEOUT", "CHORUS_ELASTIC_WORKER_ID",
    "CHORUS_ELASTIC_GENERATION", "CHORUS_ELASTIC", "CHORUS_ELASTIC_TIMEOUT",
    "HOROVOD_ELASTIC_TIMEOUT", "CHORUS_RANK", "HOROVOD_RANK", "CHORUS_SIZE", "HOROVOD_SIZE",
    "CHORUS_LOCAL_RANK", "HOROVOD_LOCAL_RANK", "CHORUS_LOCAL_SIZE", "HOROVOD_LOCAL_SIZE",
    "CHORUS_CROSS_RANK", "HOROVOD_CROSS_RANK", "CHORUS_CROSS_SIZE", "HOROVOD_CROSS_SIZE",
]


def config():
    def env(pairs):
        f = FDP()
        for name, value in pairs:
            if name in CONFIG_NAMES:
                f.boolean(True).int_in_range(0, len(CONFIG_NAMES) - 1,
                                             CONFIG_NAMES.index(name))
            else:
                f.boolean(False).string(name, 40)
            f.string(value, 64)
        return f.bytes()

    return {
        'gloo-worker': env([('CHORUS_RANK', '1'), ('CHORUS_SIZE', '4'), ('CHORUS_LOCAL_RANK', '1'),
                            ('CHORUS_LOCAL_SIZE', '2'), ('CHORUS_CROSS_RANK', '0'),
                            ('CHORUS_CROSS_SIZE', '2'),
                            ('CHORUS_RENDEZVOUS_ADDR', '10.0.0.1:29500'),
                            ('CHORUS_RENDEZVOUS_SECRET', '0a1b2c3d'),
                            ('CHORUS_RENDEZVOUS_SCOPE', 'world/3'),
                            ('CHORUS_ELASTIC_WORKER_ID', 'host1/0/2'),
                            ('CHORUS_ELASTIC_GENERATION', '3'), ('CHORUS_ELASTIC', '1')]),
        'horovod-tuning': env([('HOROVOD_FUSION_THRESHOLD', '67108864'),
                               ('HOROVOD_CYCLE_TIME', '3.5'), ('HOROVOD_CACHE_CAPACITY', '1024'),
                               ('HOROVOD_LOG_LEVEL', 'FATAL'),
                               ('HOROVOD_TIMELINE', '/tmp/timeline.json'),
                               ('HOROVOD_STALL_CHECK_DISABLE', 'yes')]),
        'timeline-and-bounds': env([('CHORUS_TIMELINE', 'DYNAMIC'),
                                    ('CHORUS_TIMELINE_MAX_MB', '0.5'),
                                    ('CHORUS_NO_PROGRESS_TIMEOUT_SECONDS', '0'),
                                    ('CHORUS_IDLE_CYCLE_MS', '50'),
                                    ('CHORUS_PIPELINE_CHUNK_BYTES', '8388608'),
                                    ('CHORUS_CONTROLLER', 'UCX')]),
        'bad-value': env([('CHORUS_CYCLE_TIME_MS', 'fast'), ('PATH', '/usr/bin')]),
    }


def wire_codec():
    # Even first byte: the rest is decoded as each message; these are real encodings.
    requests = (field(1, request('grad.conv1.weight', shape=[64, 3, 7, 7])) +
                field(1, request('grad.fc.bias', shape=[1000], group_key='g0', group_size=2)) +
                field(1, request('gather.ids', type_=1, dtype=4, shape=[5, 2], rank=1)) +
                field(1, request('a2a', type_=3, shape=[6, 4], splits=[1, 2, 3])))
    responses = (field(1, response(['grad.conv1.weight', 'grad.fc.bias'],
                                   [[64, 3, 7, 7], [1000]])) +
                 field(1, response(['gather.ids'], [[5, 2]], type_=1, dtype=4,
                                   first_dims=[5, 3, 5])) +
                 field(3, b'\x02'))
    shared = field(1, 2) + field(2, 128 << 20) + field(3, 4 << 20) + field(4, 256 << 10) + \
        field(5, 4096) + field(6, 1)
    return {
        'request-list': b'\x00' + requests + field(2, False),
        'response-list': b'\x00' + responses,
        'shared-config': b'\x00' + shared,
        'shutdown': b'\x00' + field(2, True),
    }


def negotiation():
    # Mirrors BuildRequest in negotiation_fuzzer.cc (the defaults of its draws).
    names = ["grad.0", "grad.1", "grad.2", "w", "join", ""]

    def dims(f, shape):
        f.int_in_range(0, 3, len(shape))
        for d in shape:
            f.int_in_range(0, 7, 2, 32).int_in_range(0, 4, d)

    def req(f, world, type_=0, name='grad.0', shape=(4,), root=0, process_set=0, splits=None,
            ranks=None, group=None):
        f.int_in_range(0, 8, type_, 32).int_in_range(0, len(names) - 1, names.index(name))
        f.int_in_range(0, 11, 7, 32)  # float32
        dims(f, shape)
        f.int_in_range(0, 5, 0, 32)  # sum
        f.int_in_range(0, 7, 2, 32).int_in_range(0, 7, 2, 32)  # scale factors 1.0
        f.int_in_range(-1, world, root, 32)
        f.boolean(True)  # cpu
        f.int_in_range(-1, 3, process_set, 32)
        if group:
            f.probability(0.0).boolean(group[0] == 'g').int_in_range(-1, 3, group[1], 32)
        else:
            f.probability(1.0)
        if splits is not None:
            f.probability(0.0).int_in_range(0, 5, len(splits))
            for s in splits:
                f.int_in_range(0, 7, 2, 32).int_in_range(0, 4, s)
        else:
            f.probability(1.0)
        if type_ == 7:
            f.int_in_range(0, 4, len(ranks))
            for r in ranks:
                f.int_in_range(-1, world, r, 32)
        f.probability(1.0)  # no wire dtype

    def start(world, threshold=1 << 20, sets=()):
        f = FDP().int_in_range(1, 4, world, 32).int_in_range(1, 60, 60, 32)
        f.int_in_range(0, 120, 0, 32).boolean(False).int_in_range(0, 2, len(sets), 32)
        for members in sets:
            for r in range(world):
                f.boolean(r in members)
        f.boolean(False).int_in_range(0, 1 << 20, threshold)
        return f

    def round_(f, world, per_rank, seconds=0):
        for r in range(world):
            f.probability(1.0).int_in_range(0, 3, len(per_rank[r]), 32)
            for kwargs in per_rank[r]:
                req(f, world, **kwargs)
        f.int_in_range(0, 90, seconds, 32)

    seeds = {}
    f = start(2)
    same = [dict(name='grad.0', shape=(4,)), dict(name='grad.1', shape=(2, 3))]
    round_(f, 2, [same, []])
    round_(f, 2, [[], same])
    seeds['allreduce-two-ranks'] = f.bytes()

    f = start(3, sets=[[0, 2]])
    round_(f, 3, [[dict(type_=1, name='w', shape=(2, 3))], [dict(type_=1, name='w', shape=(0, 3))],
                  [dict(type_=1, name='w', shape=(1, 3))]])
    round_(f, 3, [[dict(type_=2, name='grad.2', root=2, process_set=1)], [],
                  [dict(type_=2, name='grad.2', root=2, process_set=1)]])
    seeds['allgather-broadcast-set'] = f.bytes()

    f = start(2)
    round_(f, 2, [[dict(type_=3, name='w', shape=(4, 2), splits=[1, 3])],
                  [dict(type_=3, name='w', shape=(2, 2), splits=[2, 0])]])
    round_(f, 2, [[dict(type_=0, name='grad.0', shape=(3,))],
                  [dict(type_=0, name='grad.0', shape=(4,))]])
    seeds['alltoall-and-mismatch'] = f.bytes()

    f = start(2)
    group = [dict(name='grad.0', group=('g', 2)), dict(name='grad.1', group=('g', 2))]
    round_(f, 2, [group, group])
    round_(f, 2, [[dict(type_=7, name='w', shape=(), ranks=[0, 1])],
                  [dict(type_=7, name='w', shape=(), ranks=[0, 1])]])
    round_(f, 2, [[dict(type_=6, name='join', shape=())], [dict(name='grad.2')]], seconds=61)
    round_(f, 2, [[], [dict(type_=6, name='join', shape=())]])
    seeds['group-set-join'] = f.bytes()
    return seeds


def rendezvous_server():
    # Mirrors rendezvous_server_fuzzer.cc: options, then calls.
    names = ["world/0", "world/0/0", "0", "1", "2"]

    def name(f, n):
        f.int_in_range(0, 9, 3, 32).int_in_range(0, len(names) - 1, names.index(n))

    def secret(f):
        f.int_in_range(0, 9, 9, 32)

    def put(f, scope, key, value, generation=0):
        f.int_in_range(0, 5, 0, 32)
        name(f, scope)
        name(f, key)
        f.string(value, 5000)
        f.probability(1.0).int_in_range(-2, 3, generation)
        secret(f)

    def get(f, scope, keys, timeout_ms=0, generation=0):
        f.int_in_range(0, 5, 1, 32)
        name(f, scope)
        f.int_in_range(0, 4, len(keys), 32)
        for k in keys:
            name(f, k)
        f.probability(1.0).int_in_range(0, 2, timeout_ms)
        f.probability(1.0).int_in_range(-2, 3, generation)
        secret(f)

    def watch(f, known, timeout_ms=0):
        f.int_in_range(0, 5, 2, 32).boolean(True)  # worker "w0"
        f.probability(1.0).int_in_range(-2, 3, known)
        f.probability(1.0).int_in_range(0, 2, timeout_ms)
        secret(f)

    def publish(f, aborted=False, places=1):
        f.int_in_range(0, 5, 3, 32).boolean(True)  # the next number
        f.boolean(aborted).string('rank 1 lost', 16).boolean(False)
        f.int_in_range(0, 3, places, 32)

    def start():
        f = FDP().int_in_range(1, 4096, 4096).int_in_range(1, 8, 8).int_in_range(1, 16384, 16384)
        return f.int_in_range(1, 8192, 8192)

    seeds = {}
    f = start()
    put(f, 'world/0/0', '0', 'CUX1 rank 0 address')
    put(f, 'world/0/0', '1', 'CUX1 rank 1 address')
    get(f, 'world/0/0', ['0', '1'])
    put(f, 'world/0/0', '1', 'another value')
    seeds['allgather'] = f.bytes()
    f = start()
    watch(f, -1)
    publish(f)
    watch(f, -1, timeout_ms=2)
    put(f, 'world/0', '0', 'CUX1 address', generation=0)
    publish(f, aborted=True)
    get(f, 'world/0', ['0'], timeout_ms=2, generation=1)
    seeds['elastic-generations'] = f.bytes()
    return seeds


def membership():
    def text(f, value, max_length):
        """Text(): every byte b of the input becomes 0x20 + b % 0x5f."""
        f.string(bytes(ord(c) - 0x20 for c in value), max_length)

    def env(f, items):
        f.int_in_range(0, 3, len(items), 32)
        for name_index, value in items:
            f.boolean(False).boolean(True).int_in_range(0, 5, name_index)
            text(f, value, 12)

    def publish(f, places, aborted=False, hold=False, step=1, number=0):
        f.int_in_range(0, 3, 0, 32).int_in_range(1, 2, step)
        f.boolean(aborted).probability(0.0 if hold else 1.0)
        text(f, 'rank 1 lost', 16)
        f.boolean(not aborted).boolean(False)
        f.integral(1700000000000000 + number, 64)
        f.int_in_range(0, 2, 1 if aborted else 0, 32)
        if aborted:
            f.integral(1, 32)
        f.int_in_range(0, 3, len(places), 32)
        for worker, rank, items in places:
            f.boolean(worker == 'w1')
            if worker != 'w1':
                text(f, worker, 4)
            f.integral(rank, 32)
            env(f, items)

    def adopt(f, after, timeout_index=2):
        f.int_in_range(0, 3, 1, 32).int_in_range(-2, 4, after).int_in_range(0, 2, timeout_index)

    seeds = {}
    f = FDP().int_in_range(-1, 2, 0).boolean(True)
    publish(f, [('w1', 0, [(0, '0'), (1, '2')]), ('w2', 1, [(0, '1'), (1, '2')])])
    publish(f, [('w1', 0, [(0, '0'), (1, '1'), (3, '2')])], aborted=True, number=1)
    adopt(f, 0)
    f.int_in_range(0, 3, 2, 32).int_in_range(-1, 4, 0)  # the interrupt of world 0
    f.int_in_range(0, 3, 3, 32)  # host updates
    seeds['abort-and-adopt'] = f.bytes()
    f = FDP().int_in_range(-1, 2, -1).boolean(True)
    publish(f, [('w9', 0, [(0, '0')])])
    publish(f, [('w9', 0, [(0, '0')]), ('w1', 1, [(0, '1')])], hold=True, number=1)
    publish(f, [('w9', 0, [(0, '0')]), ('w1', 1, [(0, '1'), (2, 'world/3')])], number=2)
    adopt(f, -1)
    publish(f, [('w9', 0, [(0, '0')])], number=3)
    adopt(f, 2)
    seeds['join-hold-release'] = f.bytes()
    return seeds


def ucx_address():
    seeds = {}
    seeds['pair'] = FDP().int_in_range(1, 4, 2, 32).int_in_range(0, 1, 0, 32).int_in_range(
        0, 4, 0, 32).bytes()
    f = FDP().int_in_range(1, 4, 3, 32).int_in_range(0, 2, 1, 32)
    f.int_in_range(0, 4, 1, 32).string('other-host/1b2e4d', 300)
    f.int_in_range(0, 4, 0, 32)
    seeds['another-host'] = f.bytes()
    f = FDP().int_in_range(1, 4, 4, 32).int_in_range(0, 3, 3, 32)
    f.int_in_range(0, 4, 2, 32).int_in_range(0, 0xFFFFFFFF, 0xFFFFFFFF, 32)
    f.int_in_range(0, 4, 3, 32).int_in_range(0, 8, 6)
    f.int_in_range(0, 4, 4, 32).int_in_range(0, 3, 2).int_in_range(1, 255, 0x20, 32)
    seeds['malformed'] = f.bytes()
    return seeds


def args():
    def argv(*words, config=None):
        flag = b'\x01' if config is not None else b'\x00'
        parts = [w.encode() for w in words] + ([config.encode()] if config is not None else [])
        return flag + b'\x00'.join(parts)

    return {
        'mpi': argv('-np', '4', '-H', 'h1:2,h2:2', '--fusion-threshold-mb', '32', 'python',
                    'train.py', '--epochs', '3'),
        'gloo-elastic': argv('-np', '2', '--min-np', '1', '--max-np', '4',
                             '--host-discovery-script', './discover.sh', '--slots-per-host', '2',
                             '--blacklist-cooldown-range', '10', '100', 'python', 'train.py'),
        'config-file': argv('-np', '2', '--config-file', '@CONFIG@', '--cycle-time-ms', '5',
                            '--', 'python', '-u', 'train.py',
                            config='params: {fusion_threshold_mb: 64, cycle_time_ms: 2}\n'
                                   'logging: {level: INFO}\ncontroller: gloo\n'),
        'mpi-args': argv('-np=8', '--mpi', '--mpi-args=-mca btl ^openib --bind-to "core"',
                         '--network-interfaces', 'eth0,ib0', '--log-level', 'DEBUG', './a.out'),
        'help': argv('--help'),
    }


def config_file():
    return {
        'horovodrun': b'''controller: mpi
params: {fusion_threshold_mb: 32, cycle_time_ms: 10, cache_capacity: 2048,
         hierarchical_allreduce: true, hierarchical_allgather: false}
autotune: {enabled: true, log_file: f.csv, warmup_samples: 5, steps_per_sample: 20,
           bayes_opt_max_samples: 50, gaussian_process_noise: 0.9}
timeline: {filename: t.json, mark_cycles: true}
stall_check: {enabled: true, warning_time_seconds: 120, shutdown_time_seconds: 240}
library_options: {mpi_threads_disable: true, num_nccl_streams: 2, thread_affinity: 1,
                  gloo_timeout_seconds: 60}
logging: {level: INFO, with_timestamp: true}
''',
        'block-style': b'''controller: gloo
params:
  fusion_threshold_mb: 0
  cycle_time_ms: 0.5
logging:
  level: warning
  hide_timestamp: true
''',
        'wrong-type': b'params: {cache_capacity: lots}\n',
        'unknown-key': b'stall_check:\n  enabled: false\n  snooze: 3\n',
    }


TARGETS = {
    'hosts': hosts, 'slurm': slurm, 'discovery': discovery, 'config': config,
    'wire_codec': wire_codec, 'negotiation': negotiation,
    'rendezvous_server': rendezvous_server, 'membership': membership,
    'ucx_address': ucx_address, 'args': args, 'config_file': config_file,
}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'corpus')
    for target, make in TARGETS.items():
        directory = os.path.join(root, target)
        os.makedirs(directory, exist_ok=True)
        for old in os.listdir(directory):
            if old.startswith('seed-'):
                os.remove(os.path.join(directory, old))
        for name, data in make().items():
            with open(os.path.join(directory, 'seed-' + name), 'wb') as f:
                f.write(data)


if __name__ == '__main__':
    main()
