"""chorus.torch.elastic (horovod.torch.elastic): elastic training of PyTorch models.

    @hvd.elastic.run
    def train(state): ...            # commit with state.commit() every few batches
    train(hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0))

run wraps the training function in chorus.elastic.run_fn with chorus's reset
(chorus.elastic.reset.reset: in this version shutdown() then init()).
"""

from chorus.elastic.reset import reset as _reset
from chorus.elastic.run import run_fn
from chorus.torch.elastic.sampler import ElasticSampler
from chorus.torch.elastic.state import TorchState


def run(func):
    """Decorator running func(state, *args, **kwargs) as elastic training.

    Before each call the state is synced from rank 0 (a new worker starts from the others'
    state); when a collective fails (HorovodInternalError) the state is restored to the last
    commit, and when hosts were added or removed (HostsUpdatedInterrupt, raised at a commit on
    every rank) it is kept; in both cases chorus is reset and func is called again. See
    chorus.elastic.run for the loop.

    The call of the wrapped function must not itself be a collective: a new worker could reach
    it while the others sync, and they would wait on each other.
    """
    return run_fn(func, _reset)


__all__ = ["ElasticSampler", "TorchState", "run"]
