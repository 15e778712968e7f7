"""The building blocks of model.md §2-§5 as PyTorch functions and modules.

Module and parameter names follow model.md §9, so a model's state_dict() keys are exactly the
checkpoint's /model/ dataset names ("layers.1.state.gate.wf", ...). Matrices act on row
vectors and are stored [in, out] (model.md §0): y = x @ W.

Precision: every function runs in the dtype of its inputs; for bfloat16/float16 inputs the
reductions (norms, softmax) run in float32 (model.md §0: "All reductions in fp32 at least").
Where docs/model.md leaves a detail open, the C++ kernels decide (cited per function).
"""
import math

import numpy as np
import torch
from torch import nn

from ..config import ModelConfig

RMS_EPS = 1e-6       # model.md §2
L2_EPS = 1e-6        # model.md §3.1
T5_BUCKETS = 32      # model.md §3.3
_LOW_PRECISION = (torch.bfloat16, torch.float16)


def reduction_dtype(dtype):
    return torch.float32 if dtype in _LOW_PRECISION else dtype


# ------------------------------------------------------------------ parameters and init
def new_param(module, name, shape):
    """An uninitialised parameter; models built for a checkpoint are loaded right after, and
    init_parameters() below initialises the others."""
    param = nn.Parameter(torch.empty(*shape))
    module.register_parameter(name, param)
    return param


def trunc_normal_(tensor, gain=1.0, fan_in=None):
    """model.md §4: truncated normal with σ = sqrt(gain/fan_in)/0.8796, cut at ±2σ."""
    fan_in = fan_in or tensor.shape[-2]
    std = math.sqrt(gain / fan_in) / 0.8796
    return nn.init.trunc_normal_(tensor, 0.0, std, -2 * std, 2 * std)


class RMSNorm(nn.Module):
    """model.md §2: x · rsqrt(mean(x²) + 1e-6) ⊙ γ (parameter `scale`, init 1)."""

    def __init__(self, d_model):
        super().__init__()
        new_param(self, "scale", (d_model,))

    def forward(self, x):
        return rms_norm(x, self.scale)


def rms_norm(x, scale):
    xr = x.to(reduction_dtype(x.dtype))
    rstd = torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + RMS_EPS)
    return (xr * rstd).to(x.dtype) * scale


def head_l2_norm(x, heads):
    """model.md §3.1: per head and position, x · rsqrt(Σ_d x² + 1e-6); x [..., A] -> [..., H, dh]."""
    x = x.unflatten(-1, (heads, -1))
    xr = x.to(reduction_dtype(x.dtype))
    return (xr * torch.rsqrt(xr.pow(2).sum(-1, keepdim=True) + L2_EPS)).to(x.dtype)


def split_heads(x, heads):
    return x.unflatten(-1, (heads, -1))


def t5_bucket(distance):
    """model.md §3.3 (kernels/t5_bucket.cpp): n if n < 16 else min(31, 16 + floor(ln(n/16)/ln 8·16)),
    computed in float32 as the C++ does."""
    n = np.asarray(distance)
    with np.errstate(divide="ignore"):
        scaled = np.log(n.astype(np.float32) / np.float32(16)) / np.log(np.float32(8)) * np.float32(16)
    far = np.minimum(31, 16 + np.where(n >= 16, scaled, 0).astype(np.int64))
    return np.where(n < 16, n, far)


# ------------------------------------------------------------------ attention (model.md §3)
def window_attention(q, k, v, k_cache, v_cache, rel_bias, scale, window):
    """model.md §3.2 sliding-window self-attention over T = N/W blocks.
    q, k (both normalised), v: [B, N, H, dh]; k_cache, v_cache: [B, W, H, dh], the previous
    segment's last block (zeros at a document start: attended, not masked). Query q of a block
    sees window keys [q, q+W-1] of [K_{t-1}; K_t], i.e. the W previous tokens and not itself;
    ℓ = (Q̂·K̂ + bias(q + W - k)) · s (bias added before the scale). Returns [B, N, H·dh]."""
    B, N, H, dh = q.shape
    W, T = window, N // window
    blocks_k = torch.cat([k_cache.unsqueeze(1), k.reshape(B, T, W, H, dh)], 1)
    blocks_v = torch.cat([v_cache.unsqueeze(1), v.reshape(B, T, W, H, dh)], 1)
    keys = torch.cat([blocks_k[:, :-1], blocks_k[:, 1:]], 2)      # [B, T, 2W, H, dh]
    values = torch.cat([blocks_v[:, :-1], blocks_v[:, 1:]], 2)
    rdt = reduction_dtype(q.dtype)
    scores = torch.einsum("btqhd,btkhd->bthqk", q.reshape(B, T, W, H, dh), keys).to(rdt)
    query = torch.arange(W)[:, None]
    key = torch.arange(2 * W)[None, :]
    visible = ((key >= query) & (key <= query + W - 1)).to(q.device)
    distance = (query + W - key).clamp(min=1).numpy()
    bucket = torch.as_tensor(t5_bucket(distance), dtype=torch.long, device=q.device)
    bias = rel_bias.to(rdt)[:, bucket]                             # [H, W, 2W]
    logits = (scores + bias) * scale.to(rdt)[:, None, None]
    logits = logits.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(logits, -1).to(v.dtype)
    out = torch.einsum("bthqk,btkhd->btqhd", probs, values)
    return out.reshape(B, N, H * dh)


def cross_attention(q, k, v, scale, causal=False):
    """model.md §3.4: softmax_k(s · Q̂·K̂ᵀ)·V, no position bias; q [..., nq, H, dh], k and v
    [..., nk, H, dh]; causal: query i sees keys j <= i (model.md §7.2 SH/MH). -> [..., nq, H·dh]."""
    rdt = reduction_dtype(q.dtype)
    logits = torch.einsum("...qhd,...khd->...hqk", q, k).to(rdt) * scale.to(rdt)[:, None, None]
    if causal:
        nq, nk = q.shape[-3], k.shape[-3]
        mask = torch.arange(nk, device=q.device)[None, :] > torch.arange(nq, device=q.device)[:, None]
        logits = logits.masked_fill(mask, float("-inf"))
    probs = torch.softmax(logits, -1).to(v.dtype)
    out = torch.einsum("...hqk,...khd->...qhd", probs, v)
    return out.flatten(-2)


def take_cache(carried, doc_start, shape, like):
    """The cache a segment attends (model.md §8): zeros at a document start, else the carried one
    (None means nothing carried: every stream must start a document)."""
    zeros = torch.zeros(shape, dtype=like.dtype, device=like.device)
    if carried is None:
        return zeros
    carried = carried.to(like.dtype).reshape(shape)
    return torch.where(doc_start.view(-1, *[1] * (len(shape) - 1)), zeros, carried)


# ------------------------------------------------------------------ containers named as §9
class Mlp(nn.Module):
    """model.md §4: ReLU(h·W1)·W2, no biases (the norm is the owner's)."""

    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        new_param(self, "w1", (d_in, d_hidden))
        new_param(self, "w2", (d_hidden, d_out))

    def forward(self, h):
        return torch.relu(h @ self.w1) @ self.w2


class Attention(nn.Module):
    """layers.{i}.attn.*: wq, wk, wv [D, A]; wo [A, D] or [2A, D] with a second attention
    (wq2, scale2); scale [H]; rel_bias [H, 32]; BST adds wkc, wvc and ctx_norm (model.md §9)."""

    def __init__(self, cfg, second=False, context=False):
        super().__init__()
        D, A, H = cfg.d_model, cfg.attn_width, cfg.heads
        for name in ("wq", "wk", "wv") + (("wq2",) if second else ()):
            new_param(self, name, (D, A))
        new_param(self, "wo", (2 * A if second else A, D))
        new_param(self, "scale", (H,))
        if second:
            new_param(self, "scale2", (H,))
        new_param(self, "rel_bias", (H, T5_BUCKETS))
        if context:
            new_param(self, "wkc", (D, A))
            new_param(self, "wvc", (D, A))
            self.ctx_norm = RMSNorm(D)


class Gate(nn.Module):
    """model.md §5.3. fixed: g = σ(b); out = carry·g + u·(1 − g).
    lstm: f = σ(y·W_f + b_f + 1), i = σ(y·W_i + b_i − 1); out = carry·f + u·i."""

    def __init__(self, kind, d_in, d_model):
        super().__init__()
        self.kind = kind
        if kind == "fixed":
            new_param(self, "bias", (d_model,))
        else:
            new_param(self, "wf", (d_in, d_model))
            new_param(self, "wi", (d_in, d_model))
            new_param(self, "bf", (d_model,))
            new_param(self, "bi", (d_model,))

    def forward(self, carry, u, y):
        if self.kind == "fixed":
            g = torch.sigmoid(self.bias)
            return carry * g + u * (1 - g)
        f = torch.sigmoid(y @ self.wf + self.bf + 1)
        i = torch.sigmoid(y @ self.wi + self.bi - 1)
        return carry * f + u * i


def init_parameters(model, generator=None):
    """A fresh initialisation by model.md §1-§7's distributions (not bit-identical to brt-dist's
    counter-based Philox draws, model.md §10b, which only matter for reproducing a C++ run), with
    the recurrent state's scales model.state_id_std, state_init_std and gate_bias_mean of
    model.cfg (docs/model.md's values by default) as brt-dist declares them (core/layers/recurrent_state.cpp)."""
    g = generator
    cfg = getattr(model, "cfg", None) or ModelConfig()
    id_std, init_std, bias_mean = cfg.state_id_std, cfg.state_init_std, cfg.gate_bias_mean
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            owner = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else ""
            if leaf == "scale" or leaf in ("scale2", "freq"):
                p.fill_(1.0)
            elif name.endswith("state.ids"):
                p.normal_(0.0, id_std, generator=g)
            elif name.endswith("state.init"):
                p.normal_(0.0, init_std, generator=g)
            elif ".state.gate" in name and leaf == "bias":   # the fixed gates' b (gate, gate2)
                p.normal_(bias_mean, 0.1, generator=g)
            elif name == "embed" or leaf in ("ids", "ctx_ids", "dskip"):
                p.normal_(0.0, 1.0, generator=g)
            elif leaf == "rel_bias":
                p.normal_(0.0, 1.0 / math.sqrt(T5_BUCKETS), generator=g)
            elif leaf in ("init", "ctx_init", "bias", "bf", "bi"):
                p.normal_(0.0, 0.1, generator=g)
            elif leaf in ("wf", "wi"):
                trunc_normal_(p, 0.1)
            elif owner == "filter":  # PyTorch's nn.Linear default, as the Hyena reference
                bound = 1.0 / math.sqrt(3 if leaf in ("w0", "b0") else 64)
                p.uniform_(-bound, bound, generator=g)
            elif leaf == "log_dt":
                p.uniform_(math.log(1e-3), math.log(1e-1), generator=g)
            elif leaf == "a_re":
                p.fill_(math.log(0.5))
            elif leaf == "a_im":
                p.copy_(math.pi * torch.arange(p.shape[-1]).expand_as(p))
            elif leaf in ("c_re", "c_im"):
                p.normal_(0.0, math.sqrt(0.5), generator=g)
            elif leaf == "w_up":
                trunc_normal_(p, 1.0, fan_in=p.shape[-2])
            else:
                trunc_normal_(p, 1.0)
    return model
