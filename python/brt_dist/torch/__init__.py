"""PyTorch models of every brt-dist variant (docs/model.md), built from checkpoints.

    from brt_dist.torch import from_checkpoint, evaluate_documents
    model = from_checkpoint("runs/tiny/ckpt/ckpt-00000600.h5", dtype=torch.float64)

Modules: layers (norms, attention, gates), blocks (standard and recurrent layers), feedback
(the model.md §5.4 stack, block-major), ssm (the BST layer and its SSM sublayer), model
(BrtModel), evaluate (eval as brt-dist does it).
"""
try:
    import torch  # noqa: F401
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("brt_dist.torch needs PyTorch (Debian: apt-get install python3-torch)") from e

from .evaluate import evaluate_documents, segment_buckets
from .model import BrtModel, from_checkpoint

__all__ = ["BrtModel", "evaluate_documents", "from_checkpoint", "segment_buckets"]
