"""pytest setup for the chorus.torch tests.

Run under mpirun: every rank runs the same tests in the same order, so the collectives of one
test line up across ranks. chorus is initialised once per process for the whole session.
"""

import pytest

import chorus.torch as hvd


def pytest_configure(config):
    hvd.init()


def pytest_unconfigure(config):
    if hvd.is_initialized():
        hvd.shutdown()


@pytest.fixture
def world():
    return hvd.rank(), hvd.size()
