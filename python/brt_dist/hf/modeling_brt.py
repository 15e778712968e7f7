"""BrtForCausalLM: brt_dist.torch's BrtModel as a transformers causal LM (docs/huggingface.md).

    model = AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)  # brt-dist export --hf
    out = model(input_ids)                                   # a new document: logits [B, L, V]
    out = model(next_ids, past_key_values=out.past_key_values)   # the same document, continued

A call runs its tokens in segments of model.seq_len, as brt-dist trained and evaluates them,
each segment reading the state the one before carried (model.md §8). The state a call returns
(BrtState) is the carried state after its last whole segment plus the tokens since then (the
`tail`): the next call runs the tail again in front of its own tokens, so the logits do not
depend on how a document is cut into calls. The last, partial segment is padded (the model is
causal: padding after a token changes nothing before it). past_key_values=None starts a document.
"""
import json
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import nn

try:
    from transformers import PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutputWithPast
except ImportError:  # the fallback: transformers is not installed (docs/huggingface.md)
    PreTrainedModel = CausalLMOutputWithPast = None
try:
    from transformers import GenerationMixin  # transformers >= 4.45: generate() is a mixin
except ImportError:
    GenerationMixin = object

from ..torch.model import BrtModel
from .configuration_brt import BrtConfig

SAFETENSORS_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16}


def read_safetensors(path):
    """{name: numpy array} of a safetensors file (the format is an 8-byte little-endian header
    length, a JSON header, the data): the fallback's loader, without the safetensors package."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        data = np.frombuffer(raw, dtype=SAFETENSORS_DTYPES[info["dtype"]], count=(end - begin) // np.dtype(
            SAFETENSORS_DTYPES[info["dtype"]]).itemsize, offset=8 + n + begin)
        out[name] = data.reshape(info["shape"]).copy()
    return out


if PreTrainedModel is None:
    class PreTrainedModel(nn.Module):
        """A stand-in for transformers.PreTrainedModel: the config, and from_pretrained(DIR)
        reading config.json and model.safetensors, strictly (every parameter, no others)."""
        config_class = None

        def __init__(self, config, *args, **kwargs):
            super().__init__()
            self.config = config

        def post_init(self):
            pass

        @classmethod
        def from_pretrained(cls, folder, torch_dtype=None, **kwargs):
            model = cls(cls.config_class.from_pretrained(folder))
            tensors = read_safetensors(os.path.join(os.fspath(folder), "model.safetensors"))
            model.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()}, strict=True)
            return model.to(torch_dtype or torch.float32).eval()

    @dataclass
    class CausalLMOutputWithPast:
        """A stand-in for transformers' output record (attributes only)."""
        loss: Optional[torch.Tensor] = None
        logits: Optional[torch.Tensor] = None
        past_key_values: Optional[object] = None


class BrtState:
    """What one call carries to the next within a document: `state`, BrtModel's carried state
    (a dict named as a checkpoint's /state/ datasets) after the last whole segment; `tail`
    [B, r], the r < seq_len tokens since then; `seen`, the tokens of the document so far."""

    def __init__(self, state, tail, seen):
        self.state, self.tail, self.seen = state, tail, seen

    def get_seq_length(self, layer_idx=0):
        return self.seen


class BrtPreTrainedModel(PreTrainedModel):
    config_class = BrtConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _supports_cache_class = False   # the carried state is BrtState, not a transformers Cache

    def _init_weights(self, module):
        """Nothing: every parameter comes from model.safetensors (BrtModel.initialised draws
        docs/model.md's initial values for a fresh model)."""


class BrtForCausalLM(BrtPreTrainedModel, GenerationMixin):
    def __init__(self, config):
        super().__init__(config)
        self.model = BrtModel(config.model_config())   # parameters "model.<model.md §9 name>"
        self.post_init()

    @classmethod
    def _supports_default_dynamic_cache(cls):
        return False

    def get_output_embeddings(self):
        return None   # the output is tied to the embedding inside BrtModel (model.md §1)

    def forward(self, input_ids=None, labels=None, past_key_values=None, attention_mask=None, use_cache=None,
                return_dict=None, **kwargs):
        """logits [B, L, V] of input_ids [B, L] (model.md §1, 1/√V scaled), the mean
        cross-entropy of labels (shifted inside, -100 ignored) and the carried state."""
        if input_ids is None:
            raise ValueError("BrtForCausalLM needs input_ids (inputs_embeds are not supported)")
        _check_attention_mask(attention_mask)
        carry = past_key_values if isinstance(past_key_values, BrtState) else None
        if past_key_values is not None and carry is None and _cache_length(past_key_values):
            raise ValueError("past_key_values must be the BrtState a previous call returned")
        tokens = input_ids if carry is None else torch.cat([carry.tail.to(input_ids.device), input_ids], 1)
        logits, state, tail = self._segments(tokens, {} if carry is None else carry.state)
        logits = logits[:, tokens.shape[1] - input_ids.shape[1]:]
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                               labels[:, 1:].reshape(-1).to(logits.device), ignore_index=-100)
        seen = input_ids.shape[1] + (0 if carry is None else carry.seen)
        past = BrtState(state, tail, seen) if use_cache is not False else None
        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=past)

    def _segments(self, tokens, state):
        """The logits of every token, run segment by segment; (logits, state after the last
        whole segment, the tokens after it)."""
        N = self.model.cfg.seq_len
        B, L = tokens.shape
        parts, tail = [], tokens[:, :0]
        for begin in range(0, L, N):
            segment = tokens[:, begin:begin + N]
            n = segment.shape[1]
            if n < N:   # padded: positions after n are never read by the first n (causal)
                segment = torch.cat([segment, segment.new_zeros(B, N - n)], 1)
            logits, new_state = self.model(segment, state)
            parts.append(logits[:, :n])
            if n == N:
                state = new_state
            else:
                tail = tokens[:, begin:]
        return torch.cat(parts, 1), state, tail

    def prepare_inputs_for_generation(self, input_ids, past_key_values=None, attention_mask=None, **kwargs):
        """generate(): only the tokens the carried state has not seen."""
        if isinstance(past_key_values, BrtState):
            input_ids = input_ids[:, past_key_values.seen:]
        else:
            past_key_values = None
        return {"input_ids": input_ids, "past_key_values": past_key_values, "attention_mask": attention_mask,
                "use_cache": kwargs.get("use_cache")}

    def _reorder_cache(self, past_key_values, beam_idx):
        state = {k: v.index_select(0, beam_idx.to(v.device)) for k, v in past_key_values.state.items()}
        return BrtState(state, past_key_values.tail.index_select(0, beam_idx), past_key_values.seen)


def _cache_length(past):
    """An empty cache transformers made (generate()) counts as none."""
    length = getattr(past, "get_seq_length", None)
    return length() if callable(length) else len(past)


def _check_attention_mask(attention_mask):
    """Only right padding (causal: padding after a sequence changes nothing in it). Left
    padding would feed the pads through the carried state: not supported (batch size 1)."""
    if attention_mask is None:
        return
    mask = torch.as_tensor(attention_mask).bool()
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ValueError("BrtForCausalLM: left padding (a 0 before a 1 in attention_mask) is not supported: "
                         "the recurrent state would read the pads; use batch size 1 for generation")
