"""Data parallelism, naive and overlapped (chapter 5, lab 5).

    DataParallelNaive(model)                       # all-reduce each gradient after backward
    DataParallelBucket(model, bucket_cap_mb=25)    # async all-reduce per bucket, during backward

Both broadcast rank 0's weights at construction, have ``no_sync()``, and return from
``loss.backward()`` with every gradient averaged over the ranks, like torch's
``DistributedDataParallel``. ``training.train_step`` is the loop they share with the
single-process reference; ``timeline`` records one step, ``profiling`` traces one, and
``plots`` (not imported here) draws them.
"""

from minitorch_dist.data_parallel.base import DataParallelBase, replicas_agree
from minitorch_dist.data_parallel.bucketed import Bucket, DataParallelBucket, build_buckets
from minitorch_dist.data_parallel.naive import DataParallelNaive, broadcast_parameters
from minitorch_dist.data_parallel.timeline import Timeline
from minitorch_dist.data_parallel.toy import TiedToy
from minitorch_dist.data_parallel.training import batch_slice, make_batches, train_step

__all__ = [
    "Bucket",
    "DataParallelBase",
    "DataParallelBucket",
    "DataParallelNaive",
    "TiedToy",
    "Timeline",
    "batch_slice",
    "broadcast_parameters",
    "build_buckets",
    "make_batches",
    "replicas_agree",
    "train_step",
]
