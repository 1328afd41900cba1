#!/usr/bin/python3
"""torchrun (python3 -m torch.distributed.run) for Debian 12's torch 1.13 on Python 3.11.

torch 1.13's Std.from_str (torch/distributed/elastic/multiprocessing/api.py) finds a value's
member by iterating over the Std flag class; from Python 3.11 on, iterating over a Flag skips
the zero member, so Std.from_str('0') returns None and torchrun fails at start with the default
--redirects/--tee of 0. This replaces that one function with one that looks the value up
(Std(int)), then runs torch.distributed.run's main with this program's arguments:

    torchrun_py311.py --nnodes=1 --nproc_per_node=3 --max_restarts=3 train.py ...
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api
from torch.distributed.run import main


def _std_from_str(cls, vm):
    """Std.from_str with torch's contract: "0" -> Std.NONE, "0:3,1:0" -> {0: Std.ALL, 1:
    Std.NONE}; anything else raises ValueError."""
    if re.match(api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = classmethod(_std_from_str)

if __name__ == "__main__":
    main(sys.argv[1:])
