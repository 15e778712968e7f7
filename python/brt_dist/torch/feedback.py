"""The feedback variant (model.md §5.4, `feedback:{fixed,lstm}:{skip,dual}`; the C++ is
core/layers/feedback_stack.cpp): every layer has the recurrent layer's token side (attn.wq2,
attn.scale2, attn.wo [2A, D]) and its tokens cross-attend to K̂_s, V_s of the ONE recurrent
layer's current state Σ_t, computed before block t enters the stack. So block t of the lowest
layer needs the Σ_t that block t − 1 of a higher layer produced, and the stack runs
block-major: for t = 0..T−1, K̂_s, V_s of Σ_t; every layer's block t, bottom to top; then the
recurrent layer turns Σ_t into Σ_{t+1} from its own block-t window [K_{t−1}; K_t] (§5.2).

The layers are blocks.RecurrentLayer modules (only the recurrent one has `state`), so the
parameter names are model.md §9's and the carried state is named as rec:*'s: every layer's
cache.k / cache.v [B, W, A], and layers.{r}.state.sigma [B, S, D] (model.md §8).
"""
import torch

from .blocks import RecurrentLayer, _carry
from .layers import cross_attention, head_l2_norm, split_heads, take_cache, window_attention


def feedback_layers(cfg):
    """The L layers of a feedback model: token sides, the recurrent one with its state side."""
    (rec,) = cfg.recurrent_layers
    return [RecurrentLayer(cfg, with_state=(i == rec)) for i in range(cfg.layers)]


def _token_block(layer, x, k_prev, v_prev, k_s, v_s):
    """One layer's block (model.md §5.2 vertical, §5.4): x [B, W, D] the block's input, k_prev,
    v_prev [B, W, H, dh] block t − 1's keys and values (the cache at t = 0), K̂_s, V_s of Σ_t.
    Returns (Z, K̂ and V of this block)."""
    cfg, attn = layer.cfg, layer.attn
    H = cfg.heads
    h = layer.attn_norm(x)
    q = head_l2_norm(h @ attn.wq, H)
    k = head_l2_norm(h @ attn.wk, H)
    v = split_heads(h @ attn.wv, H)
    q2 = head_l2_norm(h @ attn.wq2, H)
    a_ee = window_attention(q, k, v, k_prev, v_prev, attn.rel_bias, attn.scale, cfg.window)
    a_es = cross_attention(q2, k_s, v_s, attn.scale2)
    y = x + torch.cat([a_ee, a_es], -1) @ attn.wo
    return layer.mlp_residual(y), k, v


def feedback_forward(layers, x, state, doc_start, detach=True):
    """The feedback stack over one segment. layers: the model's L RecurrentLayer modules;
    x [B, N, D] the embeddings; state: the carried dict (checkpoint names, "layers.{i}."
    prefixed). Returns (x_L [B, N, D], new carried state, residual stream after each layer,
    {r: Σ_0..Σ_T [B, T+1, S, D]})."""
    cfg = layers[0].cfg
    (r,) = cfg.recurrent_layers
    rec = layers[r]
    B, N, _ = x.shape
    W, T, H, dh = cfg.window, cfg.blocks, cfg.heads, cfg.head_dim
    shape = (B, W, H, dh)

    def carried(i, name):
        return state.get("layers.%d.%s" % (i, name))

    # Block −1 of every layer: zeros at a document start, else the carried cache (§8).
    k_prev = [take_cache(carried(i, "cache.k"), doc_start, shape, x) for i in range(len(layers))]
    v_prev = [take_cache(carried(i, "cache.v"), doc_start, shape, x) for i in range(len(layers))]
    sigma = rec.initial_sigma({"state.sigma": carried(r, "state.sigma")}, doc_start, x)
    sigmas = [sigma]
    outs = [[] for _ in layers]
    for t in range(T):
        # K̂_s, V_s of Σ_t, before block t enters the stack; every layer reads them.
        k_s, v_s, q_s, q2_s = rec.state.keys_values_queries(sigma, H)
        h = x[:, t * W:(t + 1) * W]
        for i, layer in enumerate(layers):
            h, k, v = _token_block(layer, h, k_prev[i], v_prev[i], k_s, v_s)
            if i == r:  # the recurrent layer's block-t window [K_{t−1}; K_t] (§5.2)
                k_win, v_win = torch.cat([k_prev[i], k], 1), torch.cat([v_prev[i], v], 1)
            k_prev[i], v_prev[i] = k, v
            outs[i].append(h)
        # The recurrent layer's horizontal step: Σ_t → Σ_{t+1} (§5.2, §5.3).
        a_ss = cross_attention(q_s, k_s, v_s, rec.state.scale)
        a_se = cross_attention(q2_s, k_win, v_win, rec.state.scale2)
        sigma = rec.state.update(sigma, torch.cat([a_ss, a_se], -1))
        sigmas.append(sigma)
    new = {}
    for i in range(len(layers)):
        new["layers.%d.cache.k" % i] = _carry(k_prev[i].flatten(-2), detach)
        new["layers.%d.cache.v" % i] = _carry(v_prev[i].flatten(-2), detach)
        if i == r:
            new["layers.%d.state.sigma" % i] = _carry(sigma, detach)
    hidden = [torch.cat(blocks, 1) for blocks in outs]
    return hidden[-1], new, hidden, {r: torch.stack(sigmas, 1)}
