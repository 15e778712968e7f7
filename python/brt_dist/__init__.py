"""Python side of brt-dist: read checkpoints and metrics, run the models in PyTorch.

    from brt_dist import load_checkpoint, read_metrics
    ckpt = load_checkpoint("runs/tiny/ckpt/ckpt-00000600.h5")
    from brt_dist.torch import from_checkpoint          # needs PyTorch
    model = from_checkpoint(ckpt)

numpy and h5py are required; PyTorch (brt_dist.torch) and pandas (metrics.to_dataframe) are
optional. docs/python.md walks through the uses.
"""
from .checkpoint import (Checkpoint, CheckpointError, CheckpointReader, CorruptCheckpointError,
                         FormatVersionError, VerifyReport, load_checkpoint, verify_checkpoint)
from .config import ModelConfig
from .metrics import read_metrics, to_dataframe
from .weights import export_safetensors, save_weights

__all__ = ["Checkpoint", "CheckpointError", "CheckpointReader", "CorruptCheckpointError",
           "FormatVersionError", "ModelConfig", "VerifyReport", "export_safetensors",
           "load_checkpoint", "read_metrics", "save_weights", "to_dataframe", "verify_checkpoint"]
__version__ = "0.1.0"
