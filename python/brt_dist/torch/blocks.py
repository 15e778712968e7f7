"""The standard layer (model.md §4: Slide, XL) and the recurrent layer (model.md §5: BRT); the
feedback stack (model.md §5.4, feedback.py) is built of these recurrent layers' token sides.

Every layer maps (x [B, N, D], carried, doc_start [B] bool) -> (out, new_carried), where
`carried` holds this layer's carried state under the checkpoint's names without the
"layers.{i}." prefix (model.md §8, docs/checkpoint-format.md §2):
    cache.k, cache.v  [B, W, A]  the last block's normalised keys and raw values
    state.sigma       [B, S, D]  recurrent layers: Σ_T
New carried state is detached (no gradient crosses a segment boundary, model.md §8) unless the
caller asks to keep the graph (detach=False).
"""
import torch
from torch import nn

from .layers import (Attention, Gate, Mlp, RMSNorm, cross_attention, head_l2_norm, new_param,
                     split_heads, take_cache, window_attention)


def _carry(tensor, detach):
    return tensor.detach() if detach else tensor


class StandardLayer(nn.Module):
    """model.md §4: h = RMSNorm_attn(x); y = x + WindowAttention(h)·Wo; z = y + MLP(RMSNorm_mlp(y))."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.attn_norm = RMSNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model)
        self.mlp = Mlp(cfg.d_model, cfg.d_ff, cfg.d_model)

    def self_attention_inputs(self, x, carried, doc_start):
        """Q̂, K̂, V of the segment (model.md §3.1) and the caches it attends (model.md §8)."""
        cfg, attn = self.cfg, self.attn
        h = self.attn_norm(x)
        q = head_l2_norm(h @ attn.wq, cfg.heads)
        k = head_l2_norm(h @ attn.wk, cfg.heads)
        v = split_heads(h @ attn.wv, cfg.heads)
        shape = (x.shape[0], cfg.window, cfg.heads, cfg.head_dim)
        k_cache = take_cache(carried.get("cache.k"), doc_start, shape, x)
        v_cache = take_cache(carried.get("cache.v"), doc_start, shape, x)
        return h, q, k, v, k_cache, v_cache

    def carried_cache(self, k, v, detach):
        """The last block's keys and values for the next segment's block 0 (model.md §8)."""
        W = self.cfg.window
        return {"cache.k": _carry(k[:, -W:].flatten(-2), detach),
                "cache.v": _carry(v[:, -W:].flatten(-2), detach)}

    def mlp_residual(self, y):
        return y + self.mlp(self.mlp_norm(y))

    def forward(self, x, carried, doc_start, detach=True):
        _, q, k, v, k_cache, v_cache = self.self_attention_inputs(x, carried, doc_start)
        a = window_attention(q, k, v, k_cache, v_cache, self.attn.rel_bias, self.attn.scale, self.cfg.window)
        y = x + a @ self.attn.wo
        return self.mlp_residual(y), self.carried_cache(k, v, detach)


class RecurrentState(nn.Module):
    """layers.{i}.state.*: the state side of model.md §5.1 (norm, ids P, init Σ0, projections,
    scales, Wo_s, gates; dual adds norm2, w1, w2, gate2)."""

    def __init__(self, cfg):
        super().__init__()
        D, A, H, S = cfg.d_model, cfg.attn_width, cfg.heads, cfg.state_size
        self.norm = RMSNorm(D)
        new_param(self, "ids", (S, D))
        new_param(self, "init", (S, D))
        for name in ("wq", "wk", "wv", "wq2"):
            new_param(self, name, (D, A))
        new_param(self, "scale", (H,))
        new_param(self, "scale2", (H,))
        new_param(self, "wo", (2 * A, D))
        self.gate = Gate(cfg.gate, 2 * A, D)
        self.dual = cfg.rec_config == "dual"
        if self.dual:
            self.norm2 = RMSNorm(D)
            new_param(self, "w1", (D, cfg.d_ff))
            new_param(self, "w2", (cfg.d_ff, D))
            self.gate2 = Gate(cfg.gate, cfg.d_ff, D)

    def keys_values_queries(self, sigma, heads):
        """h_s = RMSNorm_s(Σ) + P; K̂_s, V_s, Q̂_s, Q̂2_s (model.md §5.2)."""
        h = self.norm(sigma) + self.ids
        return (head_l2_norm(h @ self.wk, heads), split_heads(h @ self.wv, heads),
                head_l2_norm(h @ self.wq, heads), head_l2_norm(h @ self.wq2, heads))

    def update(self, sigma, c):
        """Σ_{t+1} from Σ_t and c = concat(A_ss, A_se) (model.md §5.3 skip / dual)."""
        u = c @ self.wo
        gated = self.gate(sigma, u, c)
        if not self.dual:
            return gated
        m = torch.relu(self.norm2(gated) @ self.w1)
        return self.gate2(gated, m @ self.w2, m)


class RecurrentLayer(StandardLayer):
    """model.md §5.2, block by block: block t's tokens read Σ_t (vertical), and Σ_{t+1} =
    Gate(Σ_t, concat(A_ss, A_se)) (horizontal), gradients through all T blocks of a segment.
    with_state=False: the token side only (a feedback model's other layers, model.md §5.4)."""

    def __init__(self, cfg, with_state=True):
        nn.Module.__init__(self)
        self.cfg = cfg
        self.attn_norm = RMSNorm(cfg.d_model)
        self.attn = Attention(cfg, second=True)
        self.mlp_norm = RMSNorm(cfg.d_model)
        self.mlp = Mlp(cfg.d_model, cfg.d_ff, cfg.d_model)
        if with_state:
            self.state = RecurrentState(cfg)

    def initial_sigma(self, carried, doc_start, like):
        """Σ_0: the learned state.init at a document start, else the carried Σ (model.md §8)."""
        B = like.shape[0]
        init = self.state.init.expand(B, -1, -1)
        sigma = carried.get("state.sigma")
        if sigma is None:
            return init
        return torch.where(doc_start.view(-1, 1, 1), init, sigma.to(like.dtype))

    def forward(self, x, carried, doc_start, detach=True, return_states=False):
        cfg, attn, state = self.cfg, self.attn, self.state
        B, N, _ = x.shape
        W, T, H = cfg.window, cfg.blocks, cfg.heads
        h, q, k, v, k_cache, v_cache = self.self_attention_inputs(x, carried, doc_start)
        q2 = head_l2_norm(h @ attn.wq2, H)
        a_ee = window_attention(q, k, v, k_cache, v_cache, attn.rel_bias, attn.scale, W)
        # Block t's 2W-row window [K_{t-1}; K_t] (block 0: the cache), as in §3.2.
        k_ext = torch.cat([k_cache, k], 1)
        v_ext = torch.cat([v_cache, v], 1)
        sigma = self.initial_sigma(carried, doc_start, x)
        sigmas, a_es = [sigma], []
        for t in range(T):
            k_s, v_s, q_s, q2_s = state.keys_values_queries(sigma, H)
            # Vertical: block t's tokens attend to Σ_t (W×S per head, no mask).
            a_es.append(cross_attention(q2[:, t * W:(t + 1) * W], k_s, v_s, attn.scale2))
            # Horizontal: Σ_t attends to itself and to block t's window (no mask).
            a_ss = cross_attention(q_s, k_s, v_s, state.scale)
            a_se = cross_attention(q2_s, k_ext[:, t * W:(t + 2) * W], v_ext[:, t * W:(t + 2) * W], state.scale2)
            sigma = state.update(sigma, torch.cat([a_ss, a_se], -1))
            sigmas.append(sigma)
        y = x + torch.cat([a_ee, torch.cat(a_es, 1)], -1) @ attn.wo
        new = self.carried_cache(k, v, detach)
        new["state.sigma"] = _carry(sigma, detach)
        out = self.mlp_residual(y)
        if return_states:  # Σ_0..Σ_T of this segment, for probing the state (docs/python.md)
            return out, new, torch.stack(sigmas, 1)
        return out, new
