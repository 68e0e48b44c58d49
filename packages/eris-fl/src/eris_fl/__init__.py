"""eris_fl: serverless federated learning by Federated Shard Aggregation (ERIS).

Each client's update is cut into disjoint coordinate shards, each shard is summed by a
different client acting as aggregator, and the segments are reassembled: the FedAvg update
with no central aggregator. Optional Distributed Shifted Compression (DSC) cuts the payload.
"""

from importlib.metadata import version as _version

from eris_fl.aggregator import ShardAggregator
from eris_fl.baselines import run_fedavg
from eris_fl.client import LocalTrainer
from eris_fl.comm import CommLedger
from eris_fl.compress import Compressor, Identity, RandK, StochasticQuant, TopK
from eris_fl.config import ERISConfig, FedAvgConfig
from eris_fl.dsc import ShiftState
from eris_fl.observers import ByteCounter, RoundView
from eris_fl.params import assign, flatten
from eris_fl.partition import ShardPartitioner
from eris_fl.privacy import exposure_fraction, leakage_bound
from eris_fl.simulation import ERISSimulator, History, run_simulation

__version__ = _version("eris-fl")

__all__ = [
    "ByteCounter",
    "CommLedger",
    "Compressor",
    "ERISConfig",
    "ERISSimulator",
    "FedAvgConfig",
    "History",
    "Identity",
    "LocalTrainer",
    "RandK",
    "RoundView",
    "ShardAggregator",
    "ShardPartitioner",
    "ShiftState",
    "StochasticQuant",
    "TopK",
    "__version__",
    "assign",
    "exposure_fraction",
    "flatten",
    "leakage_bound",
    "run_fedavg",
    "run_simulation",
]
