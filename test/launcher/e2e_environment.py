"""What the launcher's end-to-end scripts (chorusrun_e2e.py, ucx_launch_e2e.py) use to check
that chorusrun's environment reaches workers on other hosts: the variables to set, which of
them must not travel, and a worker that writes down the environment it got."""
import json
import os

# Values a remote worker must get byte for byte: quotes, shell syntax, newlines, '=', non-ASCII
# and a byte that is not UTF-8 (0xff, through Python's surrogateescape).
AWKWARD = ('a b\t\'single\' "double" $HOME `id` $(id) \\ back\nsecond line\n=eq= '
           '\u00e9 \u00fcn\u00ef \u65e5\u672c \r end \udcff')
# A few hundred variables, 150 KB: more than one command-line argument may hold (128 KiB on
# Linux) and more than a pipe holds by default (64 KiB).
BIG = {f'BIG_{i:03d}': ''.join(chr(33 + (i * 7 + j) % 94) for j in range(500)) for i in range(300)}
FORWARDED = dict(BIG, MYVAR=AWKWARD, EMPTYVAR='', NEWLINES='\n\n', QUOTE="'",
                 CUDA_VISIBLE_DEVICES='1,0', PYTHONUNBUFFERED='1')
# Not forwarded (launcher/process/environment.h, IsForwarded), and my.var, which --gloo cannot send
# over ssh (no shell can export it; MPI mode sends it); local workers get them all.
NOT_FORWARDED = {'my.var': 'dotted', 'HOSTNAME': 'callerhost', 'OLDPWD': '/caller/old',
                 'OLDPWD_KEPT': '/caller/kept', 'SSH_AUTH_SOCK': '/caller/agent.sock',
                 'SSH_AGENT_PID': '4242', 'SSH_CONNECTION': 'the caller connection',
                 'SSH_CLIENT': 'the caller client', 'SSH_TTY': '/dev/pts/42',
                 'BASH_FUNC_f%%': '() { echo f; }', '_HOROVOD_SECRET_KEY': 'hvd', '_': '/x/y',
                 'PWD': '/caller/pwd'}

# A Python worker that writes its environment, exactly, to $ENV_DUMP_DIR/env.<rank>.
DUMP_ENV = ('import json, os\n'
            'rank = os.environ.get("CHORUS_RANK") or os.environ["OMPI_COMM_WORLD_RANK"]\n'
            'with open(os.path.join(os.environ["ENV_DUMP_DIR"], "env." + rank), "w") as f:\n'
            '    json.dump({k.hex(): v.hex() for k, v in os.environb.items()}, f)\n')


def read_env_dump(path):
    """The environment DUMP_ENV wrote at `path` ({} when there is none)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {bytes.fromhex(k).decode(errors='surrogateescape'):
                bytes.fromhex(v).decode(errors='surrogateescape') for k, v in json.load(f).items()}
