"""BrtConfig: a brt-dist model config ([model] table) as a transformers PretrainedConfig.

Every field of brt_dist.config.ModelConfig (variant, layers, d_model, ..., window, ...) is an
attribute of the same name with the schema's default; `vocab_size` is transformers' name for
`vocab`. config.json written by `brt-dist export --hf` holds all of them.
"""
import copy
import dataclasses
import json
import os

try:
    from transformers import PretrainedConfig
except ImportError:  # the fallback: transformers is not installed (docs/huggingface.md)
    class PretrainedConfig:
        """A stand-in for transformers.PretrainedConfig, enough to read an exported folder's
        config.json and build the model: keyword arguments become attributes."""
        model_type = ""

        def __init__(self, **kwargs):
            for name, value in kwargs.items():
                setattr(self, name, value)

        @classmethod
        def from_dict(cls, config_dict, **kwargs):
            return cls(**{**config_dict, **kwargs})

        @classmethod
        def from_pretrained(cls, folder, **kwargs):
            with open(os.path.join(os.fspath(folder), "config.json"), encoding="utf-8") as f:
                return cls.from_dict(json.load(f), **kwargs)

        def to_dict(self):
            return {**copy.deepcopy(self.__dict__), "model_type": self.model_type}

from ..config import ModelConfig


def _model_fields():
    """(name, default) of every ModelConfig field: the schema's [model] keys."""
    out = []
    for field in dataclasses.fields(ModelConfig):
        default = field.default_factory() if field.default is dataclasses.MISSING else field.default
        out.append((field.name, default))
    return out


class BrtConfig(PretrainedConfig):
    model_type = "brt"

    def __init__(self, **kwargs):
        for name, default in _model_fields():
            value = kwargs.pop(name, default)
            setattr(self, name, list(value) if isinstance(value, (list, tuple)) else value)
        # transformers' name for the vocabulary size; `vocab` (brt-dist's) is the one read.
        kwargs.pop("vocab_size", None)
        self.vocab_size = self.vocab
        super().__init__(**kwargs)

    def model_config(self):
        """The brt_dist ModelConfig of these fields, resolved as brt-dist resolves it."""
        return ModelConfig(**{name: copy.deepcopy(getattr(self, name)) for name, _ in _model_fields()}).resolve()
