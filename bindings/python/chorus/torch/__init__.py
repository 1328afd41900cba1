"""chorus.torch: a drop-in replacement for horovod.torch (`import chorus.torch as hvd`)."""

from chorus.basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
                           gloo_built, gloo_enabled, init, is_homogeneous, is_initialized,
                           local_rank, local_size, mpi_built, mpi_enabled,
                           mpi_threads_supported, nccl_built, rank, rocm_built, shutdown,
                           size, start_timeline, stop_timeline)
from chorus.process_sets import (ProcessSet, add_process_set, global_process_set,
                                 remove_process_set)
from chorus.torch.compression import Compression
from chorus.torch.functions import (allgather_object, broadcast_object,
                                    broadcast_optimizer_state, broadcast_parameters)
from chorus.torch.mpi_ops import (Adasum, Average, HorovodInternalError, HostsUpdatedInterrupt,
                                  Max, Min, Product, Sum)
from chorus.torch.mpi_ops import (allgather, allgather_async, allreduce, allreduce_,
                                  allreduce_async, allreduce_async_, alltoall, alltoall_async,
                                  barrier, broadcast, broadcast_, broadcast_async,
                                  broadcast_async_, grouped_allgather, grouped_allgather_async,
                                  grouped_allreduce, grouped_allreduce_,
                                  grouped_allreduce_async, grouped_allreduce_async_,
                                  grouped_reducescatter, grouped_reducescatter_async, join,
                                  poll, reducescatter, reducescatter_async,
                                  sparse_allreduce_async, synchronize)
from chorus.torch.optimizer import DistributedOptimizer
from chorus.torch.sync_batch_norm import SyncBatchNorm
from chorus.torch import elastic  # last: chorus.torch.elastic uses the names above
