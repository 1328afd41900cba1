"""Topology, build flags, constants and process sets."""

import os

import pytest
import torch

import chorus
import chorus.torch as hvd


def launcher_env(mpirun_name, chorusrun_name):
    """A topology value as mpirun (OMPI_COMM_WORLD_*) or chorusrun --gloo (CHORUS_*) gives it."""
    return int(os.environ.get(mpirun_name, os.environ.get(chorusrun_name, "-1")))


def test_topology_matches_the_launcher():
    assert hvd.is_initialized()
    assert hvd.rank() == launcher_env("OMPI_COMM_WORLD_RANK", "CHORUS_RANK")
    assert hvd.size() == launcher_env("OMPI_COMM_WORLD_SIZE", "CHORUS_SIZE")
    assert hvd.local_rank() == launcher_env("OMPI_COMM_WORLD_LOCAL_RANK", "CHORUS_LOCAL_RANK")
    assert hvd.local_size() == launcher_env("OMPI_COMM_WORLD_LOCAL_SIZE", "CHORUS_LOCAL_SIZE")
    assert hvd.cross_size() == 1  # one host
    assert hvd.cross_rank() == 0
    assert hvd.is_homogeneous() is True


def test_build_flags():
    assert hvd.mpi_threads_supported() is True
    mpi_less = "CHORUS_RENDEZVOUS_ADDR" in os.environ  # started by chorusrun --gloo
    assert hvd.mpi_built() and hvd.gloo_built()
    assert hvd.mpi_enabled() is not mpi_less
    assert hvd.gloo_enabled() is mpi_less
    for f in (hvd.rocm_built, hvd.ccl_built, hvd.ddl_built):
        assert f() is False
    # CUDA and NCCL come together, as found when chorus was configured (ctest says which).
    # nccl_built() is, as in Horovod, an int: NCCL_VERSION_CODE, or 0 without NCCL.
    assert type(hvd.nccl_built()) is int
    assert (hvd.nccl_built() > 0) is hvd.cuda_built()
    expected = os.environ.get("CHORUS_TEST_CUDA_BUILT")
    if expected is not None:
        assert hvd.cuda_built() is (expected == "ON"), expected
    # The version code CMake read from the nccl.h it configured with.
    expected_nccl = os.environ.get("CHORUS_TEST_NCCL_VERSION")
    if expected_nccl is not None:
        assert hvd.nccl_built() == int(expected_nccl), (hvd.nccl_built(), expected_nccl)


def test_constants_distinct():
    ops = [hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product]
    assert len(set(ops)) == 6


def test_exception_types():
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    assert hvd.HorovodInternalError is chorus.ChorusError
    assert issubclass(chorus.ChorusValueError, ValueError)
    assert issubclass(chorus.ChorusValueError, hvd.HorovodInternalError)


def test_global_process_set():
    ps = hvd.global_process_set
    assert ps.process_set_id == 0
    assert ps.size() == hvd.size()
    assert ps.rank() == hvd.rank()
    assert ps.included()


def test_add_remove_process_set():
    rank, size = hvd.rank(), hvd.size()
    ranks = [0, size - 1] if size > 1 else [0]
    ps = hvd.add_process_set(ranks)
    try:
        assert ps.process_set_id is not None and ps.process_set_id > 0
        assert ps.size() == len(ranks)
        assert ps.included() == (rank in ranks)
        if ps.included():
            t = torch.tensor([float(rank + 1)])
            out = hvd.allreduce(t, op=hvd.Sum, name="ps_sum", process_set=ps)
            assert out.item() == sum(r + 1 for r in ranks)
            assert ps.rank() == ranks.index(rank)
            g = hvd.allgather(torch.tensor([rank]), name="ps_gather", process_set=ps)
            assert g.tolist() == ranks
        else:
            assert ps.rank() == -1
            with pytest.raises(ValueError, match="not in process set"):
                hvd.allreduce(torch.ones(1), name="ps_outsider", process_set=ps)
    finally:
        assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None


def test_unregistered_process_set_rejected():
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(1), process_set=hvd.ProcessSet([0]))


def test_rank_before_init_raises_valueerror():
    # Not testable without shutting down the session's runtime; check the message path only.
    from chorus import basics
    assert "init" in basics._NOT_INITIALIZED
