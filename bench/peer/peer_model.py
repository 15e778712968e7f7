"""A PyTorch peer of brt-dist's models, written for speed (docs/gpu.md, "The PyTorch peer").
The same computation as docs/model.md (shared docs) for slide, xl,
rec:{fixed,lstm}:{skip,dual} and bst:{sh,mh,mf}:{s4d,unstructured}; feedback:* is not here.

How it is fast, where the installed torch allows (each tier falls back automatically):
  - attention `flex` (torch >= 2.5 with compile, CUDA): FlexAttention over the band of the whole
    segment against [cache; segment] (model.md §3.2's W x 2W tiles, fully masked blocks skipped),
    `mask_mod` = the window, `score_mod` = score + s_h·bias_h(distance) (model.md §3.3; s_h·q̂ is
    the query: (q̂·k̂ + b)·s = (s·q̂)·k̂ + s·b);
  - attention `sdpa` (torch >= 2.1): all T blocks at once as batched attention of W queries
    over their 2W-row window, the bias and mask as one additive [H, W, 2W] mask;
  - attention `plain` (torch 1.13 here): the same blocked formulation with matmul + softmax;
  - `compile=True`: each layer kind's forward is one torch.compile'd function of its parameter
    dict (regional compilation: all layers of a kind share the compiled code);
  - bf16 autocast is the caller's (bench_peer.py), and fused AdamW; fused projections
    (one [D, 3A|4A] matrix for Q, K, V, Q2); every per-head scale s folded into the queries.
Cross-attentions (§3.4) are SDPA where present (a causal SDPA per block for BST SH/MH).
The recurrent state side (§5.2) is the only sequential part: T steps per segment.
S4D mode arithmetic runs in float64 real arithmetic (brt-dist computes the modes in double);
the FFT convolution (§7.1) in float32 (float64 for float64 models), outside compiled code.

Parameters are the checkpoint's model.md §9 tensors, except the fused projections
(attn.wqkv = [wq|wk|wv(|wq2)], attn.wkvc = [wkc|wvc], state.wqkv = [wq|wk|wv|wq2]);
load_brt_parameters() concatenates them from a checkpoint. Carried state (model.md §8) is a list
of per-layer tuples: (k cache, v cache[, Σ | S4D modes (re, im) | U_prev][, MF ctx_last]).
"""
import math
import re

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# The configuration (model.md §0): the [model] keys of brt-dist's key schema with its defaults.
from peer_config import PeerConfig  # bench/peer is on sys.path, as it is to import this module

try:  # torch >= 2.5
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:
    create_block_mask = flex_attention = None
TORCH = tuple(int(n) for n in re.findall(r"\d+", torch.__version__)[:2])
sdpa = getattr(F, "scaled_dot_product_attention", None)
HAVE_SDPA = sdpa is not None and TORCH >= (2, 1)   # scale=
HAVE_COMPILE = hasattr(torch, "compile")
_no_compile = getattr(getattr(torch, "compiler", None), "disable", lambda f: f)
RMS_EPS = L2_EPS = 1e-6          # model.md §2, §3.1
BUCKETS = 32                     # model.md §3.3
LOW = (torch.bfloat16, torch.float16)


# ------------------------------------------------------------------ small pieces
def rms_norm(x, scale):                                                      # model.md §2
    xr = x.float() if x.dtype in LOW else x
    return (xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + RMS_EPS)).to(x.dtype) * scale


def l2_heads(x, heads):                                                      # model.md §3.1
    x = x.unflatten(-1, (heads, -1))
    xr = x.float() if x.dtype in LOW else x
    return (xr * torch.rsqrt(xr.pow(2).sum(-1, keepdim=True) + L2_EPS)).to(x.dtype)


def t5_buckets(W):
    """bucket(d) for d = 0..W (model.md §3.3, in float32 as kernels/t5_bucket.cpp; d = 0 unused)."""
    n = np.arange(W + 1)
    with np.errstate(divide="ignore"):
        scaled = np.log(n.astype(np.float32) / np.float32(16)) / np.log(np.float32(8)) * np.float32(16)
    far = np.minimum(31, 16 + np.where(n >= 16, scaled, 0).astype(np.int64))
    return torch.as_tensor(np.where(n < 16, n, far), dtype=torch.long)


def _to(x, dtype):
    return x if x.dtype == dtype else x.to(dtype)


def attend(q, k, v, mask=None, causal=False, impl="plain"):
    """softmax(q·kᵀ + mask)·v over [..., L, dh] (the per-head scale is already in q)."""
    dt = q.dtype
    k, v = _to(k, dt), _to(v, dt)
    if impl != "plain" and HAVE_SDPA:
        batch = q.shape[:-2]
        q4, k4, v4 = (t.reshape(-1, *t.shape[-3:]) if t.dim() > 4 else t for t in (q, k, v))
        m = None if mask is None else _to(mask, dt)
        out = sdpa(q4, k4, v4, attn_mask=m, is_causal=causal, scale=1.0)
        return out.reshape(*batch, *out.shape[-2:])
    s = q @ k.transpose(-1, -2)
    s = s.float() if dt in LOW else s
    if mask is not None:
        s = s + mask
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1).to(dt) @ v


def heads_first(x, H):   # [B, L, A] or [B, L, H, dh] -> [B, H, L, dh]
    return (x.unflatten(-1, (H, -1)) if x.dim() == 3 else x).transpose(1, 2)


# ------------------------------------------------------------------ §3.2 window attention
def window_attention(q, k, v, kc, vc, rel_bias, bucket, scale, W, impl, block_mask):
    """q, k (normalised), v [B, N, H, dh]; kc, vc [B, W, H, dh] the cache (zeros at a document
    start: attended). Query i sees the W previous tokens, ℓ = (q̂·k̂ + bias(dist))·s. -> [B, N, A]."""
    B, N, H, dh = q.shape
    T = N // W
    dist_bias = rel_bias[:, bucket]                                           # [H, W+1]
    kx, vx = torch.cat([kc, k], 1), torch.cat([vc, v], 1)                    # [B, N+W, H, dh]
    qs = q * _to(scale, q.dtype)[:, None]                                     # (q̂·k̂ + b)·s = (s·q̂)·k̂ + s·b
    if impl == "flex":   # the band of [cache; segment]: key j sees distance i + W - j in [1, W]
        sb = dist_bias * scale[:, None]                                       # [H, W+1], the one captured buffer

        def score_mod(score, b, h, qi, ki):
            return score + sb[h, (qi + W - ki).clamp(0, W)]
        dt = q.dtype
        out = flex_attention(qs.transpose(1, 2), _to(kx, dt).transpose(1, 2), _to(vx, dt).transpose(1, 2),
                             score_mod=score_mod, block_mask=block_mask, scale=1.0)
        return out.transpose(1, 2).reshape(B, N, H * dh)
    # Blocked: block t's W queries over [K_{t-1}; K_t], all T blocks batched.
    qi = torch.arange(W, device=q.device)[:, None]
    dist = qi + W - torch.arange(2 * W, device=q.device)[None, :]            # [W, 2W]
    mask = dist_bias[:, dist.clamp(0, W)] * scale[:, None, None]
    mask = mask.float() if q.dtype in LOW else _to(mask, q.dtype)
    mask = mask.masked_fill(~((dist >= 1) & (dist <= W)), float("-inf"))   # [H, W, 2W]
    qb = qs.view(B, T, W, H, dh).transpose(2, 3)                              # [B, T, H, W, dh]
    win = lambda x: torch.cat([x[:, :N].view(B, T, W, H, dh), x[:, W:].view(B, T, W, H, dh)], 2).transpose(2, 3)
    out = attend(qb, win(kx), win(vx), mask=mask, impl=impl)                  # [B, T, H, W, dh]
    return out.transpose(2, 3).reshape(B, N, H * dh)


def window_block_mask(N, W, device):
    """FlexAttention's block mask of the §3.2 band: query i, key j of [cache; segment]: i <= j < i + W."""
    def mask_mod(b, h, qi, ki):
        return (ki >= qi) & (ki < qi + W)
    return create_block_mask(mask_mod, None, None, N, N + W, device=device)


# ------------------------------------------------------------------ layer functions
# Each takes (p: {name: tensor}, x [B, N, D], carry tuple, doc_start [B] bool, cfg, impl,
# block_mask) and returns (x, new carry); compiled once per kind when compile is on.
def _attn_inputs(p, x, kc, vc, doc_start, cfg, n_proj):
    H = cfg.heads
    h = rms_norm(x, p["attn_norm.scale"])
    parts = (h @ p["attn.wqkv"]).chunk(n_proj, -1)                            # q, k, v(, q2)
    keep = ~doc_start.view(-1, 1, 1, 1)                                       # model.md §8: zeros at a start
    kc = torch.where(keep, kc, torch.zeros_like(kc))
    vc = torch.where(keep, vc, torch.zeros_like(vc))
    q, k = l2_heads(parts[0], H), l2_heads(parts[1], H)
    v = parts[2].unflatten(-1, (H, -1))
    q2 = l2_heads(parts[3], H) if n_proj > 3 else None
    return h, q, k, v, q2, kc, vc


def _self_attention(p, q, k, v, kc, vc, cfg, impl, bm):
    return window_attention(q, k, v, kc, vc, p["attn.rel_bias"], p["bucket"], p["attn.scale"],
                            cfg.window, impl, bm)


def _mlp(p, y):                                                               # model.md §4
    return y + torch.relu(rms_norm(y, p["mlp_norm.scale"]) @ p["mlp.w1"]) @ p["mlp.w2"]


def standard_layer(p, x, carry, doc_start, cfg, impl, bm):                    # model.md §4
    kc, vc = carry
    _, q, k, v, _, kc, vc = _attn_inputs(p, x, kc, vc, doc_start, cfg, 3)
    y = x + _self_attention(p, q, k, v, kc, vc, cfg, impl, bm) @ p["attn.wo"]
    W = cfg.window
    return _mlp(p, y), (k[:, -W:], v[:, -W:])


def _gate(p, name, kind, carry, u, y):                                        # model.md §5.3
    if kind == "fixed":
        g = torch.sigmoid(p[name + ".bias"])
        return carry * g + u * (1 - g)
    f = torch.sigmoid(y @ p[name + ".wf"] + p[name + ".bf"] + 1)
    i = torch.sigmoid(y @ p[name + ".wi"] + p[name + ".bi"] - 1)
    return carry * f + u * i


def recurrent_layer(p, x, carry, doc_start, cfg, impl, bm):                   # model.md §5.2
    kc, vc, sigma = carry
    B, N, D = x.shape
    W, T, H, dh = cfg.window, cfg.T, cfg.heads, cfg.head_dim
    _, gate, config = cfg.kind
    _, q, k, v, q2, kc, vc = _attn_inputs(p, x, kc, vc, doc_start, cfg, 4)
    a_ee = _self_attention(p, q, k, v, kc, vc, cfg, impl, bm)
    kx, vx = heads_first(torch.cat([kc, k], 1), H), heads_first(torch.cat([vc, v], 1), H)   # [B, H, N+W, dh]
    init = p["state.init"].expand(B, -1, -1)
    sigma = torch.where(doc_start.view(-1, 1, 1), init, _to(sigma, init.dtype))
    s1, s2 = p["state.scale"][:, None, None], p["state.scale2"][:, None, None]   # [H, 1, 1]
    ks_all, vs_all = [], []
    for t in range(T):   # the horizontal direction: Σ_t -> Σ_{t+1}, sequential
        hs = rms_norm(sigma, p["state.norm.scale"]) + p["state.ids"]
        qs, ks, vs, q2s = (hs @ p["state.wqkv"]).chunk(4, -1)
        qs, ks, q2s = heads_first(l2_heads(qs, H), H), heads_first(l2_heads(ks, H), H), heads_first(l2_heads(q2s, H), H)
        vs = heads_first(vs, H)
        ks_all.append(ks)
        vs_all.append(vs)
        a_ss = attend(qs * _to(s1, qs.dtype), ks, vs, impl=impl)                          # S x S
        a_se = attend(q2s * _to(s2, q2s.dtype), kx[:, :, t * W:(t + 2) * W], vx[:, :, t * W:(t + 2) * W], impl=impl)
        c = torch.cat([a_ss.transpose(1, 2).flatten(2), a_se.transpose(1, 2).flatten(2)], -1)   # [B, S, 2A]
        u_ = _gate(p, "state.gate", gate, sigma, c @ p["state.wo"], c)
        if config == "dual":
            m = torch.relu(rms_norm(u_, p["state.norm2.scale"]) @ p["state.w1"])
            u_ = _gate(p, "state.gate2", gate, u_, m @ p["state.w2"], m)
        sigma = u_
    # The vertical direction for all blocks at once: block t's tokens read Σ_t (W x S).
    q2b = (q2 * _to(p["attn.scale2"], q2.dtype)[:, None]).view(B, T, W, H, dh).transpose(2, 3)
    a_es = attend(q2b, torch.stack(ks_all, 1), torch.stack(vs_all, 1), impl=impl)       # [B, T, H, W, dh]
    a_es = a_es.transpose(2, 3).reshape(B, N, H * dh)
    y = x + torch.cat([a_ee, _to(a_es, a_ee.dtype)], -1) @ p["attn.wo"]
    return _mlp(p, y), (k[:, -W:], v[:, -W:], sigma)


# ------------------------------------------------------------------ §7 BST
@_no_compile
def causal_conv(u, kernel, dskip):
    """model.md §7.1: y[b,c,t,f] = Σ_{τ<=t} K[c,f,τ]·u[b,t−τ,f] + Dskip[c,f]·u[b,t,f] by real FFTs of
    length 2L. u [B, L, F], kernel [C, F, L] -> [B, C, L, F]; float32 unless float64."""
    wt = torch.float64 if u.dtype == torch.float64 else torch.float32
    L = u.shape[1]
    u = u.to(wt)
    fu = torch.fft.rfft(u, n=2 * L, dim=1)                                   # [B, L+1, F]
    fk = torch.fft.rfft(kernel.to(wt), n=2 * L, dim=-1).transpose(1, 2)      # [C, L+1, F]
    y = torch.fft.irfft(fu[:, None] * fk[None], n=2 * L, dim=2)[:, :, :L]
    return y + dskip.to(wt)[None, :, None, :] * u[:, None]


def s4d_modes(p):
    """ΔA_n and C̃_n = C_n·(exp(ΔA_n) − 1)/A_n (B_n = 1) as (re, im) float64 pairs [C, Ds, M]."""
    d64 = lambda n: p[n].double()
    dt = torch.exp(d64("ssm.log_dt"))[..., None]
    ar, ai = -torch.exp(d64("ssm.a_re")), d64("ssm.a_im")
    dr, di = dt * ar, dt * ai
    er, ei = torch.exp(dr) * torch.cos(di) - 1, torch.exp(dr) * torch.sin(di)
    cr, ci = d64("ssm.c_re"), d64("ssm.c_im")
    nr, ni = cr * er - ci * ei, cr * ei + ci * er
    den = ar * ar + ai * ai
    return dr, di, (nr * ar + ni * ai) / den, (ni * ar - nr * ai) / den


def s4d_powers(dr, di, count):
    """exp(l·ΔA_n) for l = 0..count-1 as (re, im) [C, Ds, M, count]."""
    l = torch.arange(count, dtype=torch.float64, device=dr.device)
    mag, ang = torch.exp(dr[..., None] * l), di[..., None] * l
    return mag * torch.cos(ang), mag * torch.sin(ang)


def implicit_filter(p, C, Ds, L):
    """model.md §7.1 `unstructured` (kernels/implicit_filter.cpp) -> K [C, Ds, L]."""
    dtype = p["ssm.filter.w0"].dtype
    t = torch.arange(L, dtype=torch.float64, device=p["ssm.filter.w0"].device) / L
    h = torch.stack([t, torch.cos(2 * math.pi * t), torch.sin(2 * math.pi * t)], -1).to(dtype)
    for i in range(3):
        h = torch.sin(p["ssm.filter.freq"] * (h @ p["ssm.filter.w%d" % i] + p["ssm.filter.b%d" % i]))
    R = C * Ds
    lo, hi = math.log(1e-2) / 1.5, math.log(1e-2) / 0.3
    r = torch.arange(R, dtype=torch.float64, device=t.device)
    delta = (lo + (hi - lo) * r / (R - 1) if R > 1 else torch.full_like(r, lo)).abs()
    decay = torch.exp(-t[None, :] * delta[:, None]).to(dtype)
    return ((h @ p["ssm.filter.w_out"]).transpose(0, 1) * decay).view(C, Ds, L)


def ssm_context(p, x, carry, doc_start, cfg):
    """model.md §7.1 + §7.3: the context states (SH [B, N, D], MH [B, H, N, D], MF block ends
    [B, T, S_ctx, D]) and the new SSM carry (modes (re, im) for s4d, U for unstructured)."""
    B, N, _ = x.shape
    C, Ds = cfg.C, cfg.Ds
    bst, kern = cfg.kind[1], cfg.kind[2]
    u = rms_norm(x, p["ssm.norm.scale"]) @ p["ssm.w_dn"]                      # [B, N, Ds]
    new = ()
    start = doc_start.view(-1, 1, 1, 1)
    if kern == "unstructured":
        with torch.autocast(x.device.type, enabled=False):
            K = implicit_filter(p, C, Ds, N)
        if cfg.ssm_carry:   # [U_prev; U] with the kernel zero-padded to 2N taps, last N outputs
            prev = torch.where(start[..., 0], torch.zeros_like(u), _to(carry[0], u.dtype))
            y = causal_conv(torch.cat([prev, u], 1), torch.cat([K, torch.zeros_like(K)], -1), p["ssm.dskip"])[:, :, N:]
            new = (u,)
        else:
            y = causal_conv(u, K, p["ssm.dskip"])
    else:
        dr, di, ctr, cti = s4d_modes(p)
        pr, pi = s4d_powers(dr, di, N + 1)                                    # l = 0..N
        K = 2 * (ctr[..., None] * pr[..., :N] - cti[..., None] * pi[..., :N]).sum(-2)   # [C, Ds, N]
        y = causal_conv(u, K, p["ssm.dskip"])
        if cfg.ssm_carry:
            zero = torch.zeros_like(carry[0])
            xr = torch.where(start, zero, carry[0])
            xi = torch.where(start, zero, carry[1])                           # [B, C, Ds, M] float64
            # Y_c[t] += 2·Re Σ_n C̃_n·exp((t+1)ΔA_n)·x_n
            rr = ctr[..., None] * pr[..., 1:] - cti[..., None] * pi[..., 1:]
            ri = ctr[..., None] * pi[..., 1:] + cti[..., None] * pr[..., 1:]
            resp = 2 * (torch.einsum("cfmt,bcfm->bctf", rr, xr) - torch.einsum("cfmt,bcfm->bctf", ri, xi))
            y = y + resp.to(y.dtype)
            with torch.no_grad():   # x ← exp(NΔA)·x + Σ_τ exp((N−1−τ)ΔA)·U[τ] (detached)
                u64 = u.detach().double()
                wr, wi = pr[..., N].detach(), pi[..., N].detach()
                nxr = wr * xr - wi * xi + torch.einsum("cfmt,btf->bcfm", pr[..., :N].detach().flip(-1), u64)
                nxi = wr * xi + wi * xr + torch.einsum("cfmt,btf->bcfm", pi[..., :N].detach().flip(-1), u64)
            new = (nxr, nxi)
    y = _to(y, u.dtype)
    if bst == "sh":
        return y[:, 0] @ p["ssm.w_up"], new
    if bst == "mh":
        return torch.einsum("bhnf,hfd->bhnd", y, _to(p["ssm.w_up"], y.dtype)), new
    W = cfg.window
    return y[:, :, W - 1::W].transpose(1, 2) @ p["ssm.w_up"], new             # [B, T, S_ctx, D]


def bst_layer(p, x, carry, doc_start, cfg, impl, bm):                         # model.md §7.2
    B, N, D = x.shape
    W, T, H, dh = cfg.window, cfg.T, cfg.heads, cfg.head_dim
    bst = cfg.kind[1]
    kc, vc = carry[:2]
    _, q, k, v, q2, kc, vc = _attn_inputs(p, x, kc, vc, doc_start, cfg, 4)
    a_self = _self_attention(p, q, k, v, kc, vc, cfg, impl, bm)
    n_ssm = (2 if cfg.kind[2] == "s4d" else 1) if cfg.ssm_carry else 0
    ctx, new_ssm = ssm_context(p, x, carry[2:2 + n_ssm], doc_start, cfg)
    new_ctx = ()
    if bst == "mf":   # block k reads the end of block k − 1; block 0 ctx_init or the carried end
        init = p["ssm.ctx_init"].expand(B, -1, -1)
        first = init
        if cfg.ssm_carry:
            first = torch.where(doc_start.view(-1, 1, 1), init, _to(carry[-1], ctx.dtype))
            new_ctx = (ctx[:, -1],)
        ctx = torch.cat([_to(first, ctx.dtype)[:, None], ctx[:, :-1]], 1)    # [B, T, S, D]
    hc = rms_norm(ctx, p["attn.ctx_norm.scale"])
    if bst == "mf":
        hc = hc + p["ssm.ctx_ids"]
    if bst == "mh":   # head h projects its own context through its own columns
        kv = torch.einsum("bhnd,dxhe->bnxhe", hc, _to(p["attn.wkvc"], hc.dtype).view(D, 2, H, dh))
        kcx, vcx = kv[:, :, 0], kv[:, :, 1]
        kcx = l2_heads(kcx.flatten(-2), H)
    else:
        kcx, vcx = (hc @ p["attn.wkvc"]).chunk(2, -1)
        kcx, vcx = l2_heads(kcx, H), vcx.unflatten(-1, (H, -1))
    q2b = (q2 * _to(p["attn.scale2"], q2.dtype)[:, None]).view(B, T, W, H, dh).transpose(2, 3)
    if bst == "mf":   # kcx [B, T, S, H, dh]: no mask
        a_x = attend(q2b, kcx.transpose(2, 3), vcx.transpose(2, 3), impl=impl)
    else:             # query i of block k sees the block's context positions j <= i
        blk = lambda t: t.reshape(B, T, W, H, dh).transpose(2, 3)
        a_x = attend(q2b, blk(kcx), blk(vcx), causal=True, impl=impl)
    a_x = a_x.transpose(2, 3).reshape(B, N, H * dh)
    y = x + torch.cat([a_self, _to(a_x, a_self.dtype)], -1) @ p["attn.wo"]
    return _mlp(p, y), (k[:, -W:], v[:, -W:]) + new_ssm + new_ctx


def head_losses(x, scale, embed, targets, mask):
    """model.md §1: cross-entropy of RMSNorm_final(x)·Eᵀ/√V per position (0 where masked)."""
    h = rms_norm(x, scale) * (1.0 / math.sqrt(embed.shape[0]))
    logits = h @ embed.t()
    logits = logits.float() if logits.dtype in LOW else logits
    losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view(targets.shape)
    return torch.where(mask, losses, torch.zeros_like(losses))


# ------------------------------------------------------------------ modules
class Params(nn.Module):
    """A container of named parameters (dotted names as model.md §9's, fused where noted)."""

    def add(self, name, *shape):
        owner = self
        *path, leaf = name.split(".")
        for part in path:
            if not hasattr(owner, part):
                owner.add_module(part, Params())
            owner = getattr(owner, part)
        owner.register_parameter(leaf, nn.Parameter(torch.empty(*shape)))


FUSED = {"attn.wqkv": ("attn.wq", "attn.wk", "attn.wv", "attn.wq2"), "attn.wkvc": ("attn.wkc", "attn.wvc"),
         "state.wqkv": ("state.wq", "state.wk", "state.wv", "state.wq2")}


class Layer(Params):
    def __init__(self, cfg, kind):
        super().__init__()
        D, A, H, F_, S = cfg.d_model, cfg.A, cfg.heads, cfg.d_ff, cfg.state_size
        self.kind, self.fn = kind, {"standard": standard_layer, "recurrent": recurrent_layer, "bst": bst_layer}[kind]
        two = kind != "standard"
        for name, shape in (("attn_norm.scale", (D,)), ("attn.wqkv", (D, (4 if two else 3) * A)),
                            ("attn.wo", ((2 if two else 1) * A, D)), ("attn.scale", (H,)),
                            ("attn.rel_bias", (H, BUCKETS)), ("mlp_norm.scale", (D,)), ("mlp.w1", (D, F_)),
                            ("mlp.w2", (F_, D))):
            self.add(name, *shape)
        if two:
            self.add("attn.scale2", H)
        if kind == "recurrent":
            _, gate, config = cfg.kind
            for name, shape in (("state.norm.scale", (D,)), ("state.ids", (S, D)), ("state.init", (S, D)),
                                ("state.wqkv", (D, 4 * A)), ("state.scale", (H,)), ("state.scale2", (H,)),
                                ("state.wo", (2 * A, D))):
                self.add(name, *shape)
            gates = [("state.gate", 2 * A)] + ([("state.gate2", F_)] if config == "dual" else [])
            for g, d_in in gates:
                if gate == "fixed":
                    self.add(g + ".bias", D)
                else:
                    for n, sh in (("wf", (d_in, D)), ("wi", (d_in, D)), ("bf", (D,)), ("bi", (D,))):
                        self.add(g + "." + n, *sh)
            if config == "dual":
                for name, shape in (("state.norm2.scale", (D,)), ("state.w1", (D, F_)), ("state.w2", (F_, D))):
                    self.add(name, *shape)
        if kind == "bst":
            _, bst, kern = cfg.kind
            C, Ds, M = cfg.C, cfg.Ds, cfg.ssm_state // 2
            for name, shape in (("attn.wkvc", (D, 2 * A)), ("attn.ctx_norm.scale", (D,)), ("ssm.norm.scale", (D,)),
                                ("ssm.w_dn", (D, Ds)), ("ssm.w_up", (H, Ds, D) if bst == "mh" else (Ds, D)),
                                ("ssm.dskip", (C, Ds))):
                self.add(name, *shape)
            if kern == "s4d":
                self.add("ssm.log_dt", C, Ds)
                for n in ("a_re", "a_im", "c_re", "c_im"):
                    self.add("ssm." + n, C, Ds, M)
            else:
                for n, sh in (("w0", (3, 64)), ("b0", (64,)), ("w1", (64, 64)), ("b1", (64,)), ("w2", (64, 64)),
                              ("b2", (64,)), ("freq", (64,)), ("w_out", (64, C * Ds))):
                    self.add("ssm.filter." + n, *sh)
            if bst == "mf":
                self.add("ssm.ctx_ids", cfg.ctx_states, D)
                self.add("ssm.ctx_init", cfg.ctx_states, D)
        self.register_buffer("bucket", t5_buckets(cfg.window), persistent=False)

    def initial_carry(self, cfg, B, device, dtype):
        """Zeros (model.md §8): a stream must start a document at its first step."""
        W, H, dh = cfg.window, cfg.heads, cfg.head_dim
        z = lambda *s, dt=dtype: torch.zeros(*s, dtype=dt, device=device)
        carry = (z(B, W, H, dh), z(B, W, H, dh))
        if self.kind == "recurrent":
            carry += (z(B, cfg.state_size, cfg.d_model, dt=self.state.init.dtype),)
        if self.kind == "bst" and cfg.ssm_carry:
            if cfg.kind[2] == "s4d":
                carry += (z(B, cfg.C, cfg.Ds, cfg.ssm_state // 2, dt=torch.float64),) * 2
            else:
                carry += (z(B, cfg.seq_len, cfg.Ds),)
            if cfg.kind[1] == "mf":
                carry += (z(B, cfg.ctx_states, cfg.d_model),)
        return carry


class PeerModel(nn.Module):
    """Embedding, the variant's layer stack, final norm and the tied output (model.md §1)."""

    def __init__(self, cfg, attention="auto", compile=False, device="cpu"):
        super().__init__()
        self.cfg = cfg if isinstance(cfg, PeerConfig) else PeerConfig.from_table(cfg)
        cfg = self.cfg
        self.compiled = bool(compile) and HAVE_COMPILE
        self.attention = pick_attention(attention, self.compiled, device)
        self.embed = nn.Parameter(torch.empty(cfg.vocab, cfg.d_model))
        self.layers = nn.ModuleList(
            Layer(cfg, "bst" if i in cfg.bst_layers else "recurrent" if i in cfg.recurrent_layers else "standard")
            for i in range(cfg.layers))
        self.final_norm = Params()
        self.final_norm.add("scale", cfg.d_model)
        self._fns, self._masks = {}, {}
        self._head = torch.compile(head_losses, dynamic=False) if self.compiled else head_losses

    def _fn(self, kind, fn):
        if kind not in self._fns:
            self._fns[kind] = torch.compile(fn, dynamic=False) if self.compiled else fn
        return self._fns[kind]

    def initial_state(self, B, device=None, dtype=None):
        """dtype: the activations' (torch.bfloat16 under bf16 autocast), so that the carry's
        dtype does not change after the first step (no recompilation)."""
        device = device or self.embed.device
        dtype = dtype or self.embed.dtype
        return [layer.initial_carry(self.cfg, B, device, dtype) for layer in self.layers]

    def hidden(self, tokens, state, doc_start):
        """x_L [B, N, D] of one segment and the new carried state (detached, model.md §8)."""
        cfg = self.cfg
        B, N = tokens.shape
        if N != cfg.seq_len:
            raise ValueError("segment length %d != model.seq_len %d" % (N, cfg.seq_len))
        bm = None
        if self.attention == "flex":
            key = (N, cfg.window, str(tokens.device))
            if key not in self._masks:
                self._masks[key] = window_block_mask(N, cfg.window, tokens.device)
            bm = self._masks[key]
        x = F.embedding(tokens, self.embed)
        new = []
        for layer, carry in zip(self.layers, state):
            p = dict(layer.named_parameters())
            p["bucket"] = layer.bucket
            x, c = self._fn(layer.kind, layer.fn)(p, x, carry, doc_start, cfg, self.attention, bm)
            # Fresh contiguous strides (a view's would change the compiled code's guards at step 2).
            new.append(tuple(t.detach().clone(memory_format=torch.contiguous_format) for t in c))
        return x, new

    def token_losses(self, tokens, targets, mask, state, doc_start):
        x, new = self.hidden(tokens, state, doc_start)
        return self._head(x, self.final_norm.scale, self.embed, targets, mask), new

    def loss(self, tokens, targets, mask, state, doc_start):
        """The training loss: mean cross-entropy over the unmasked targets, and the new state."""
        losses, new = self.token_losses(tokens, targets, mask, state, doc_start)
        return losses.sum() / mask.sum().clamp(min=1), new

    # ---------------------------------------------------------------- weights
    def load_brt_parameters(self, params):
        """From {model.md §9 name: array} (a brt-dist checkpoint's /model/), fusing the projections."""
        used = set()
        with torch.no_grad():
            for name, p in self.named_parameters():
                head, _, leaf = name.rpartition(".")
                owner, _, last = head.rpartition(".")
                key, pre = last + "." + leaf, owner + "." if owner else ""
                parts = [pre + n for n in FUSED[key] if pre + n in params] if key in FUSED else [name]
                if not parts or parts[0] not in params:
                    raise ValueError("%s: not in the checkpoint (a %s model?)" % (parts[0] if parts else name,
                                                                                  self.cfg.variant))
                value = torch.cat([torch.as_tensor(np.asarray(params[n])) for n in parts], -1)
                if tuple(value.shape) != tuple(p.shape):
                    raise ValueError("%s: checkpoint %s has shape %s, the peer needs %s"
                                     % (name, "+".join(parts), tuple(value.shape), tuple(p.shape)))
                p.copy_(value)
                used.update(parts)
        extra = sorted(set(params) - used)
        if extra:
            raise ValueError("checkpoint tensors the peer does not use: %s" % ", ".join(extra[:5]))
        return self

    def init_random(self, seed=0):
        """model.md §1-§7's init distributions (plain normals instead of truncated ones)."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                leaf = name.rsplit(".", 1)[-1]
                cpu = torch.empty(p.shape)
                if leaf in ("scale", "scale2", "freq"):
                    cpu.fill_(1.0)
                elif name.endswith("state.ids"):
                    cpu.normal_(0, self.cfg.state_id_std, generator=g)
                elif name.endswith("state.init"):
                    cpu.normal_(0, self.cfg.state_init_std, generator=g)
                elif ".state.gate" in name and leaf == "bias":   # the fixed gates' b
                    cpu.normal_(self.cfg.gate_bias_mean, 0.1, generator=g)
                elif name == "embed" or leaf in ("ids", "ctx_ids", "dskip"):
                    cpu.normal_(0, 1, generator=g)
                elif leaf == "rel_bias":
                    cpu.normal_(0, BUCKETS ** -0.5, generator=g)
                elif leaf in ("init", "ctx_init", "bias", "bf", "bi"):
                    cpu.normal_(0, 0.1, generator=g)
                elif ".filter." in name:
                    cpu.uniform_(-1 / math.sqrt(cpu.shape[0]), 1 / math.sqrt(cpu.shape[0]), generator=g)
                elif leaf == "log_dt":
                    cpu.uniform_(math.log(1e-3), math.log(1e-1), generator=g)
                elif leaf == "a_re":
                    cpu.fill_(math.log(0.5))
                elif leaf == "a_im":
                    cpu.copy_(math.pi * torch.arange(cpu.shape[-1]).expand_as(cpu))
                elif leaf in ("c_re", "c_im"):
                    cpu.normal_(0, 0.5 ** 0.5, generator=g)
                else:   # matrices: σ = sqrt(gain / fan_in)
                    cpu.normal_(0, math.sqrt((0.1 if leaf in ("wf", "wi") else 1.0) / cpu.shape[-2]), generator=g)
                p.copy_(cpu)
        return self


def pick_attention(requested, compiled, device):
    """auto: flex (compiled, CUDA) > sdpa (torch >= 2.1) > plain."""
    cuda = str(device).startswith("cuda")
    if requested == "auto":
        return "flex" if flex_attention is not None and compiled and cuda else "sdpa" if HAVE_SDPA else "plain"
    if requested == "flex" and flex_attention is None:
        raise ValueError("attention flex: this torch (%s) has no FlexAttention" % torch.__version__)
    if requested == "sdpa" and not HAVE_SDPA:
        raise ValueError("attention sdpa: this torch (%s) has no scaled_dot_product_attention(scale=)"
                         % torch.__version__)
    if requested not in ("flex", "sdpa", "plain"):
        raise ValueError("attention: %r is not auto, flex, sdpa or plain" % requested)
    return requested
