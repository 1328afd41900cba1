"""chorus.run as horovod.run (ctest python_run_func): a function with arguments, and a closure,
run on 2 ranks in both modes return each rank's value in rank order; a rank that raises makes
chorus.run raise RuntimeError with chorusrun's summary naming that rank; horovod.run's argument
errors and deprecated spellings behave as Horovod's. Prints one line per check; exits 1 on the
first failure."""

import os
import sys
import warnings

import chorus


def check(cond, what):
    print(("ok      " if cond else "FAILED  ") + what, flush=True)
    if not cond:
        sys.exit(1)


def reduce_rank(scale, offset=0.0):
    import chorus.torch as hvd
    import torch
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
    return {"rank": hvd.rank(), "size": hvd.size(), "value": total * scale + offset}


def fail_on_rank_1():
    import chorus.torch as hvd
    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("rank 1 gives up")
    hvd.allreduce(__import__("torch").ones(1), name="never")
    return "unreachable"


def main():
    for use_gloo in (False, True):
        mode = "gloo" if use_gloo else "mpi"
        got = chorus.run(reduce_rank, args=(10.0,), kwargs={"offset": 0.5}, num_proc=2,
                         use_gloo=use_gloo, use_mpi=not use_gloo)
        check(got == [{"rank": 0, "size": 2, "value": 30.5}, {"rank": 1, "size": 2, "value": 30.5}],
              "%s: results by rank: %s" % (mode, got))
        captured = [1, 2, 3]
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = chorus.run(lambda: sum(captured) + int(os.environ.get("CHORUS_RANK", "0")) * 0,
                             np=2, use_gloo=use_gloo)
        check(got == [6, 6], "%s: a closure, deprecated np=: %s" % (mode, got))
        check(any(issubclass(w.category, DeprecationWarning) and "np is deprecated" in str(w.message)
                  for w in seen), "%s: np= warns as deprecated" % mode)
        try:
            chorus.run(fail_on_rank_1, num_proc=2, use_gloo=use_gloo)
            check(False, "%s: a rank's exception raised nothing" % mode)
        except RuntimeError as e:
            check("exited with status 1" in str(e) and "chorusrun: job failed" in str(e) and
                  "rank 1 on localhost raised ValueError: rank 1 gives up" in str(e),
                  "%s: a rank's exception: RuntimeError %r" % (mode, str(e)))
    for kwargs, message in (({"hosts": "localhost:2", "hostfile": "/dev/null"},
                             "Argument hosts and hostfile only allow one provided."),
                            ({"use_gloo": True, "use_mpi": True},
                             "Argument use_gloo and use_mpi only allow one set True.")):
        try:
            chorus.run(reduce_rank, args=(1.0,), num_proc=2, **kwargs)
            check(False, "%s accepted" % kwargs)
        except ValueError as e:
            check(str(e) == message, "ValueError %r" % str(e))
    print("check_run_func: PASS", flush=True)


if __name__ == "__main__":
    main()
