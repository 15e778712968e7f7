"""The whole model (model.md §1, §8) for every variant, built from a checkpoint.

    model = BrtModel.from_checkpoint(ckpt, dtype=torch.float64)
    state = model.initial_state(batch=1)                       # nothing carried yet
    logits, state = model(tokens, state, doc_start)            # one segment of N tokens
    nats, count, state = model.segment_loss(inputs, targets, mask, state, doc_start)

`state` is a dict of carried tensors named as the checkpoint's /state/ datasets
("layers.1.state.sigma" [B, S, D], "layers.0.cache.k" [B, W, A], ...), so a document stream
runs segment by segment with explicit state in and out, and a checkpoint's carried state
loads with state_from_checkpoint().
"""
import math

import numpy as np
import torch
from torch import nn

from ..config import ModelConfig
from .blocks import RecurrentLayer, StandardLayer
from .feedback import feedback_forward, feedback_layers
from .layers import RMSNorm, init_parameters, new_param
from .ssm import BstLayer


class BrtModel(nn.Module):
    """Embedding, the layer stack of the variant, final norm and tied output (model.md §1).
    state_dict() keys are model.md §9's names, the checkpoint's /model/ datasets."""

    def __init__(self, cfg):
        super().__init__()
        cfg = cfg if isinstance(cfg, ModelConfig) else ModelConfig.from_config(cfg)
        cfg.resolve()
        self.cfg = cfg
        new_param(self, "embed", (cfg.vocab, cfg.d_model))
        layers = feedback_layers(cfg) if cfg.feedback else []  # model.md §5.4
        for i in range(len(layers), cfg.layers):
            if cfg.is_bst_layer(i):
                layers.append(BstLayer(cfg))
            elif cfg.is_recurrent_layer(i):
                layers.append(RecurrentLayer(cfg))
            else:
                layers.append(StandardLayer(cfg))
        self.layers = nn.ModuleList(layers)
        self.final_norm = RMSNorm(cfg.d_model)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_checkpoint(cls, ckpt, dtype=torch.float64, strict=True):
        """The model of a checkpoint (brt_dist.Checkpoint or a path), its weights loaded and
        cast to `dtype` (float32, float64 or bfloat16)."""
        if isinstance(ckpt, (str, bytes)) or hasattr(ckpt, "__fspath__"):
            from ..checkpoint import load_checkpoint
            ckpt = load_checkpoint(ckpt)
        model = cls(ckpt.model_config)
        model.load_parameters(ckpt.parameters, strict=strict)
        return model.to(dtype)

    @classmethod
    def initialised(cls, cfg, dtype=torch.float32, seed=0):
        """A fresh model drawn from docs/model.md's init distributions (docs/python.md)."""
        model = cls(cfg)
        torch.manual_seed(seed)
        init_parameters(model)
        return model.to(dtype)

    def load_parameters(self, parameters, strict=True):
        """From {model.md §9 name: array}; shapes must match."""
        tensors = {name: torch.as_tensor(np.asarray(value)) for name, value in parameters.items()}
        missing, unexpected = self.load_state_dict(tensors, strict=False)
        if strict and (missing or unexpected):
            raise ValueError("parameters do not match the model %s: missing %s, unexpected %s"
                             % (self.cfg.variant, missing, unexpected))
        return self

    # ---------------------------------------------------------------- carried state (§8)
    def initial_state(self, batch=None):
        """No carried state: every stream must start a document (doc_start all true)."""
        return {}

    def state_from_checkpoint(self, ckpt):
        """The carried state a checkpoint stored (/state/*), as tensors of this model's dtype.
        The S4D carry is stored as the raw bytes of complex double modes (docs/bst.md): it is
        reinterpreted, not converted."""
        dtype, device = self.embed.dtype, self.embed.device
        out = {}
        for name, value in ckpt.state.items():
            value = np.asarray(value)
            if name.endswith(".ssm.carry"):
                modes = np.ascontiguousarray(value).view(np.float64)            # [B, C, Ds, M, 2]
                out[name] = torch.complex(torch.from_numpy(modes[..., 0].copy()), torch.from_numpy(modes[..., 1].copy())).to(device)
            else:
                out[name] = torch.as_tensor(value).to(device=device, dtype=dtype)
        return out

    # ---------------------------------------------------------------- forward
    def forward(self, tokens, state=None, doc_start=None, detach_state=True, return_hidden=False):
        """logits [B, N, V] of one segment (model.md §1: RMSNorm_final(x_L)·Eᵀ/√V) and the new
        carried state. tokens [B, N] (N = model.seq_len); doc_start [B] bool (default: all
        true when state is empty, else all false). return_hidden: also a dict with the
        residual stream after each layer ("hidden") and each recurrent layer's states Σ_0..Σ_T
        of the segment ("sigmas": {layer index: [B, T+1, S, D]}), for probing."""
        device = self.embed.device
        tokens = torch.as_tensor(tokens, dtype=torch.long).to(device)
        if tokens.dim() == 1:
            tokens = tokens[None]
        B, N = tokens.shape
        if N % self.cfg.window:
            raise ValueError("segment length %d is not a multiple of model.window %d" % (N, self.cfg.window))
        state = state or {}
        if doc_start is None:
            doc_start = torch.full((B,), not state, dtype=torch.bool)
        doc_start = torch.as_tensor(doc_start, dtype=torch.bool).reshape(B)
        if not state and not bool(doc_start.all()):
            raise ValueError("a stream continues a document but no carried state was given")
        doc_start = doc_start.to(device)
        x = self.embed[tokens]
        if self.cfg.feedback:  # model.md §5.4: the whole stack runs block-major (feedback.py)
            x_in = x
            x, new_state, layer_outs, sigmas = feedback_forward(self.layers, x, state, doc_start, detach_state)
            hidden = [x_in] + layer_outs
        else:
            x, new_state, hidden, sigmas = self._layer_major(x, state, doc_start, detach_state, return_hidden)
        logits = self.final_norm(x) @ self.embed.t() / math.sqrt(self.cfg.vocab)
        if return_hidden:  # the residual stream after each layer, and the recurrent states
            return logits, new_state, {"hidden": hidden, "sigmas": sigmas}
        return logits, new_state

    def _layer_major(self, x, state, doc_start, detach_state, return_states):
        """Every other variant: layer after layer over the whole segment. Returns (x_L, new
        carried state, residual stream after each layer, {recurrent layer: Σ_0..Σ_T})."""
        new_state, hidden, sigmas = {}, [x], {}
        for i, layer in enumerate(self.layers):
            prefix = "layers.%d." % i
            mine = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
            if return_states and isinstance(layer, RecurrentLayer):
                x, carried, sigmas[i] = layer(x, mine, doc_start, detach=detach_state, return_states=True)
            else:
                x, carried = layer(x, mine, doc_start, detach=detach_state)
            new_state.update({prefix + k: v for k, v in carried.items()})
            hidden.append(x)
        return x, new_state, hidden, sigmas

    def segment_loss(self, inputs, targets, mask, state=None, doc_start=None, detach_state=True):
        """(sum of cross-entropies in nats over the unmasked targets, their count, new state)."""
        logits, state = self.forward(inputs, state, doc_start, detach_state)
        targets = torch.as_tensor(targets, dtype=torch.long).reshape(logits.shape[:2])
        mask = torch.as_tensor(mask, dtype=torch.bool).reshape(logits.shape[:2])
        count = int(mask.sum())                      # before the move: meta tensors hold no values
        targets, mask = targets.to(logits.device), mask.to(logits.device)
        work = logits.float() if logits.dtype in (torch.bfloat16, torch.float16) else logits
        losses = torch.nn.functional.cross_entropy(
            work.reshape(-1, work.shape[-1]), targets.clamp(0, self.cfg.vocab - 1).reshape(-1),
            reduction="none").reshape(targets.shape)
        losses = torch.where(mask, losses, torch.zeros_like(losses))
        return losses.sum(), count, state

    def token_losses(self, inputs, targets, mask, state=None, doc_start=None):
        """Per-position losses [B, N] (zero where masked) and the new state, without a graph."""
        with torch.no_grad():
            logits, state = self.forward(inputs, state, doc_start)
            device = logits.device
            losses = torch.nn.functional.cross_entropy(
                logits.double().reshape(-1, logits.shape[-1]),
                torch.as_tensor(targets, dtype=torch.long).to(device).clamp(0, self.cfg.vocab - 1).reshape(-1),
                reduction="none").reshape(logits.shape[:2])
            mask = torch.as_tensor(mask, dtype=torch.bool).to(device).reshape(losses.shape)
            return torch.where(mask, losses, torch.zeros_like(losses)), state


def from_checkpoint(ckpt, dtype=torch.float64, strict=True):
    """BrtModel.from_checkpoint."""
    return BrtModel.from_checkpoint(ckpt, dtype=dtype, strict=strict)
