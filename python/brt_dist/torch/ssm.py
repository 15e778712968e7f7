"""The Block-State Transformer layer (model.md §7; C++: core/layers/bst_ssm.cpp, core/layers/bst_layer.cpp,
kernels/ssm/*).

Carried state of a BST layer (names below "layers.{i}.", model.md §7.3):
    cache.k, cache.v  [B, W, A]        as every §3.2 layer
    ssm.carry         [B, C, Ds, M]    s4d with ssm_carry: the complex modes x_n (complex128;
                                       the C++ keeps them in double too, docs/bst.md)
    ssm.carry_u       [B, N, Ds]       unstructured with ssm_carry: the previous segment's U
    ssm.ctx_last      [B, S_ctx, D]    MF: Ctx_c[N − 1] of the previous segment
"""
import math

import torch
from torch import nn

from .blocks import StandardLayer, _carry
from .layers import (Attention, Mlp, RMSNorm, cross_attention, head_l2_norm, new_param,
                     rms_norm, window_attention)

FILTER_ORDER = 64    # the implicit filter's width (kernels/implicit_filter.h)
FILTER_EMBED = 3     # z(t) = [t, cos 2πt, sin 2πt]


def causal_conv(u, kernel, dskip):
    """model.md §7.1: y[b,c,t,f] = Σ_{τ<=t} K[c,f,τ]·u[b,t−τ,f] + Dskip[c,f]·u[b,t,f], by real FFTs
    of length 2L (length L would wrap the future into the past). u [B, L, F], kernel [C, F, L]
    -> [B, C, L, F]. bfloat16/float16 inputs are convolved in float32 (torch.fft needs it)."""
    L = u.shape[1]
    work = torch.float32 if u.dtype in (torch.bfloat16, torch.float16) else u.dtype
    n = 2 * L
    spectrum_u = torch.fft.rfft(u.to(work), n=n, dim=1)                   # [B, n/2+1, F]
    spectrum_k = torch.fft.rfft(kernel.to(work), n=n, dim=-1)             # [C, F, n/2+1]
    y = torch.fft.irfft(spectrum_u[:, None] * spectrum_k.transpose(1, 2)[None], n=n, dim=2)[:, :, :L]
    return (y + dskip.to(work)[None, :, None, :] * u.to(work)[:, None]).to(u.dtype)


class ImplicitFilter(nn.Module):
    """layers.{i}.ssm.filter.*: model.md §7.1 `unstructured` (kernels/implicit_filter.cpp).
    h = Linear(3→64) → sin(ω⊙·) → Linear(64→64) → sin(ω⊙·) → Linear(64→64) → sin(ω⊙·) →
    Linear(64→R, no bias), one ω shared by the three sines; K[r, l] = h_r(t_l)·exp(−t_l·|δ_r|)
    with t_l = l / N_seg and δ_r linear in r over [ln(1e−2)/1.5, ln(1e−2)/0.3]."""

    def __init__(self, filters):
        super().__init__()
        O, E = FILTER_ORDER, FILTER_EMBED
        for name, shape in (("w0", (E, O)), ("b0", (O,)), ("w1", (O, O)), ("b1", (O,)),
                            ("w2", (O, O)), ("b2", (O,)), ("freq", (O,)), ("w_out", (O, filters))):
            new_param(self, name, shape)
        self.filters = filters

    def forward(self, length):
        dtype = self.w0.dtype
        t = torch.arange(length, dtype=torch.float64, device=self.w0.device) / length
        z = torch.stack([t, torch.cos(2 * math.pi * t), torch.sin(2 * math.pi * t)], -1).to(dtype)
        h = z
        for w, b in ((self.w0, self.b0), (self.w1, self.b1), (self.w2, self.b2)):
            h = torch.sin(self.freq * (h @ w + b))
        lo, hi = math.log(1e-2) / 1.5, math.log(1e-2) / 0.3
        r = torch.arange(self.filters, dtype=torch.float64, device=self.w0.device)
        delta = (lo + (hi - lo) * r / (self.filters - 1) if self.filters > 1 else torch.full_like(r, lo)).abs()
        decay = torch.exp(-t[None, :] * delta[:, None]).to(dtype)             # [R, L]
        return (h @ self.w_out).transpose(0, 1) * decay


def s4d_modes(ssm):
    """Per (c, f, n), in complex128 (the C++ computes the modes in double for every T):
    ΔA_n, and C̃_n = C_n·(exp(ΔA_n) − 1)/A_n with A_n = −exp(a_re) + i·a_im (B_n = 1)."""
    dt = torch.exp(ssm.log_dt.to(torch.float64))[..., None]                   # [C, Ds, 1]
    a = torch.complex(-torch.exp(ssm.a_re.to(torch.float64)), ssm.a_im.to(torch.float64))
    dta = dt * a
    c = torch.complex(ssm.c_re.to(torch.float64), ssm.c_im.to(torch.float64))
    return dta, c * (torch.exp(dta) - 1) / a


def s4d_powers(dta, first, count):
    """exp(l·ΔA_n) for l in [first, first + count): [C, Ds, M, count]."""
    steps = torch.arange(first, first + count, dtype=torch.float64, device=dta.device)
    return torch.exp(dta[..., None] * steps)


class Ssm(nn.Module):
    """layers.{i}.ssm.*: the SSM sublayer of model.md §7.1 producing the context states."""

    def __init__(self, cfg):
        super().__init__()
        D, Ds, C, H = cfg.d_model, cfg.ssm_features, cfg.ssm_channels, cfg.heads
        self.cfg = cfg
        self.norm = RMSNorm(D)
        new_param(self, "w_dn", (D, Ds))
        new_param(self, "w_up", (H, Ds, D) if cfg.bst_variant == "mh" else (Ds, D))
        new_param(self, "dskip", (C, Ds))
        if cfg.ssm_kernel == "s4d":
            M = cfg.ssm_state // 2
            new_param(self, "log_dt", (C, Ds))
            for name in ("a_re", "a_im", "c_re", "c_im"):
                new_param(self, name, (C, Ds, M))
        else:
            self.filter = ImplicitFilter(C * Ds)
        if cfg.bst_variant == "mf":
            new_param(self, "ctx_ids", (cfg.ctx_states, D))
            new_param(self, "ctx_init", (cfg.ctx_states, D))

    def convolve(self, u, carried, doc_start, detach):
        """Y [B, C, N, Ds] of U [B, N, Ds], continuing the document across segments when
        ssm_carry is on (model.md §7.3); returns (Y, new carried entries)."""
        cfg, N = self.cfg, u.shape[1]
        B, continues = u.shape[0], (~doc_start).view(-1, 1, 1)
        if cfg.ssm_kernel == "unstructured":
            kernel = self.filter(N).unflatten(0, (cfg.ssm_channels, cfg.ssm_features))
            if not cfg.ssm_carry:
                return causal_conv(u, kernel, self.dskip), {}
            # [U_prev; U] with the N-tap kernel zero-padded to 2N taps; keep the last N outputs.
            prev = carried.get("ssm.carry_u")
            prev = torch.zeros_like(u) if prev is None else torch.where(continues, prev.to(u.dtype), torch.zeros_like(u))
            padded = torch.cat([kernel, torch.zeros_like(kernel)], -1)
            y = causal_conv(torch.cat([prev, u], 1), padded, self.dskip)[:, :, N:]
            return y, {"ssm.carry_u": _carry(u, detach)}
        dta, c_tilde = s4d_modes(self)
        kernel = 2 * (c_tilde[..., None] * s4d_powers(dta, 0, N)).sum(-2).real     # [C, Ds, N]
        y = causal_conv(u, kernel.to(u.dtype), self.dskip)
        if not cfg.ssm_carry:
            return y, {}
        # The carried modes x_n (detached): Y_c[t] += 2·Re Σ_n C̃_n·exp((t+1)ΔA_n)·x_n ...
        x = carried.get("ssm.carry")
        shape = (B,) + tuple(dta.shape)
        zeros = torch.zeros(shape, dtype=torch.complex128, device=u.device)
        x = zeros if x is None else torch.where(doc_start.view(-1, 1, 1, 1), zeros, x.to(torch.complex128))
        response = torch.einsum("cfmt,bcfm->bctf", c_tilde[..., None] * s4d_powers(dta, 1, N), x)
        y = y + (2 * response.real).to(y.dtype)
        # ... and x ← exp(NΔA)·x + Σ_τ exp((N−1−τ)ΔA)·U[τ] for the next segment.
        powers = s4d_powers(dta, 0, N + 1)
        step_in = torch.einsum("cfmt,btf->bcfm", powers[..., :N].flip(-1), u.to(torch.float64).to(torch.complex128))
        x_next = powers[None, ..., N] * x + step_in
        return y, {"ssm.carry": _carry(x_next, detach)}

    def forward(self, x, carried, doc_start, detach=True):
        """Context states (model.md §7.1/7.2): SH [B, N, D], MH [B, H, N, D], MF block ends
        [B, T, S_ctx, D]; and the new carried entries."""
        cfg = self.cfg
        u = self.norm(x) @ self.w_dn
        y, new = self.convolve(u, carried, doc_start, detach)
        if cfg.bst_variant == "sh":
            return y[:, 0] @ self.w_up, new
        if cfg.bst_variant == "mh":
            return torch.einsum("bhnf,hfd->bhnd", y, self.w_up), new
        W = cfg.window
        ends = y[:, :, W - 1::W].transpose(1, 2)                                 # [B, T, C, Ds]
        return ends @ self.w_up, new


class BstLayer(StandardLayer):
    """model.md §7.2: window self-attention (scale s1, T5 bias, carried cache) and cross-attention
    of Q̂2 to the context states (scale s2), Y = X + concat(A_self, A_cross)·Wo (2A→D), then
    the §4 MLP. All blocks in parallel."""

    def __init__(self, cfg):
        nn.Module.__init__(self)
        self.cfg = cfg
        self.attn_norm = RMSNorm(cfg.d_model)
        self.attn = Attention(cfg, second=True, context=True)
        self.mlp_norm = RMSNorm(cfg.d_model)
        self.mlp = Mlp(cfg.d_model, cfg.d_ff, cfg.d_model)
        self.ssm = Ssm(cfg)

    def mf_context(self, ends, carried, doc_start, detach):
        """MF (model.md §7.2): block k >= 1 reads the end state of block k − 1; block 0 reads
        ctx_init at a document start or with ssm_carry off, else the previous segment's last
        context (detached)."""
        B = ends.shape[0]
        init = self.ssm.ctx_init.expand(B, -1, -1)
        last = carried.get("ssm.ctx_last")
        if self.cfg.ssm_carry and last is not None:
            first = torch.where(doc_start.view(-1, 1, 1), init, last.to(ends.dtype))
        else:
            first = init
        context = torch.cat([first[:, None], ends[:, :-1]], 1)                   # [B, T, S, D]
        return context, {"ssm.ctx_last": _carry(ends[:, -1], detach)}

    def context_keys_values(self, context):
        """K̂c = norm(RMSNorm_ctx(ctx)·Wkc), Vc = RMSNorm_ctx(ctx)·Wvc (MF adds E_ctx after
        the norm; MH: head h projects its own context through its own columns)."""
        cfg, attn = self.cfg, self.attn
        H, dh = cfg.heads, cfg.head_dim
        hc = rms_norm(context, attn.ctx_norm.scale)
        if cfg.bst_variant == "mf":
            hc = hc + self.ssm.ctx_ids
        if cfg.bst_variant == "mh":                 # context [B, H, N, D]
            wk = attn.wkc.view(cfg.d_model, H, dh)
            wv = attn.wvc.view(cfg.d_model, H, dh)
            k = head_l2_norm(torch.einsum("bhnd,dhe->bnhe", hc, wk).flatten(-2), H)
            return k, torch.einsum("bhnd,dhe->bnhe", hc, wv)
        return head_l2_norm(hc @ attn.wkc, H), (hc @ attn.wvc).unflatten(-1, (H, dh))

    def forward(self, x, carried, doc_start, detach=True):
        cfg, attn = self.cfg, self.attn
        B, N, _ = x.shape
        W, T, H, dh = cfg.window, cfg.blocks, cfg.heads, cfg.head_dim
        h, q, k, v, k_cache, v_cache = self.self_attention_inputs(x, carried, doc_start)
        a_self = window_attention(q, k, v, k_cache, v_cache, attn.rel_bias, attn.scale, W)
        context, new_ssm = self.ssm(x, carried, doc_start, detach)
        q2 = head_l2_norm(h @ attn.wq2, H).reshape(B, T, W, H, dh)
        if cfg.bst_variant == "mf":
            context, new_ctx = self.mf_context(context, carried, doc_start, detach)
            new_ssm.update(new_ctx)
            kc, vc = self.context_keys_values(context)                           # [B, T, S, H, dh]
            a_cross = cross_attention(q2, kc, vc, attn.scale2)
        else:   # SH/MH: query i of block k sees the block's context positions j <= i
            kc, vc = self.context_keys_values(context)                           # [B, N, H, dh]
            a_cross = cross_attention(q2, kc.reshape(B, T, W, H, dh), vc.reshape(B, T, W, H, dh),
                                      attn.scale2, causal=True)
        a_cross = a_cross.reshape(B, N, H * dh)
        y = x + torch.cat([a_self, a_cross], -1) @ attn.wo
        new = self.carried_cache(k, v, detach)
        new.update(new_ssm)
        return self.mlp_residual(y), new
