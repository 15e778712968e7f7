"""The model's shape and variant (model.md §0, §5.3, §6, §7), as core/model_config.cpp
resolves them from a run config's [model] table; feedback:* is model.md §5.4.

The fields, their types and defaults are the [model] keys of brt-dist's key table, read from
config_keys.json (config_schema.py), never listed here: a key added to brt-dist is a field here.
"""
import dataclasses
import tomllib

from . import config_schema

# Every model.variant brt-dist accepts (core/model_config.cpp model_variants()).
VARIANTS = config_schema.key("model.variant")["allowed"]


class _ModelConfigMethods:
    """ModelConfig's behaviour; its fields come from the schema (below the class)."""

    @classmethod
    def from_config(cls, config):
        """From a parsed run config (dict with a "model" table) or a TOML string; resolved."""
        if isinstance(config, str):
            config = tomllib.loads(config)
        table = config.get("model", config)
        known = {f.name for f in dataclasses.fields(cls)}   # the schema's [model] keys
        cfg = cls(**{k: v for k, v in table.items() if k in known})
        cfg.resolve()
        return cfg

    # Derived (model.md §0)
    @property
    def attn_width(self):            # A
        return self.heads * self.head_dim

    @property
    def blocks(self):                # T
        return self.seq_len // self.window

    @property
    def family(self):
        return self.variant.split(":")[0]

    @property
    def gate(self):                  # rec:*, feedback:* only: "fixed" | "lstm"
        return self.variant.split(":")[1]

    @property
    def rec_config(self):            # rec:*, feedback:* only: "skip" | "dual"
        return self.variant.split(":")[2]

    @property
    def bst_variant(self):           # bst:* only: "sh" | "mh" | "mf"
        return self.variant.split(":")[1]

    @property
    def ssm_kernel(self):            # bst:* only: "s4d" | "unstructured"
        return self.variant.split(":")[2]

    @property
    def ssm_features(self):          # Ds = D/4 (model.md §7.1)
        return self.d_model // 4

    @property
    def ssm_channels(self):          # C: 1 (SH), H (MH), S_ctx (MF)
        return {"sh": 1, "mh": self.heads, "mf": self.ctx_states}[self.bst_variant]

    @property
    def feedback(self):              # model.md §5.4: every layer also reads the one recurrent state
        return self.family == "feedback"

    def is_recurrent_layer(self, i):
        return self.family in ("rec", "feedback") and i in self.recurrent_layers

    def is_bst_layer(self, i):
        return self.family == "bst" and i in self.bst_layers

    def resolve(self):
        """model_config.cpp resolve(): checks the variant and sizes, fills the default layer
        lists ([9, 19] for 24 layers else [L-3]; BST [0, 9] clamped)."""
        if self.variant not in VARIANTS:
            raise ValueError("model.variant: \"%s\" is not a variant; expected one of %s" % (self.variant, VARIANTS))
        for key in ("layers", "d_model", "heads", "head_dim", "d_ff", "vocab", "seq_len", "window"):
            if getattr(self, key) <= 0:
                raise ValueError("model.%s: %d must be > 0" % (key, getattr(self, key)))
        if self.seq_len % self.window:
            raise ValueError("model.window: %d does not divide model.seq_len %d" % (self.window, self.seq_len))
        if self.family in ("rec", "feedback"):
            if not self.recurrent_layers:
                self.recurrent_layers = [9, 19] if self.layers == 24 else [max(0, self.layers - 3)]
            self.recurrent_layers = sorted(self.recurrent_layers)
            if self.feedback and len(self.recurrent_layers) != 1:
                raise ValueError("model.recurrent_layers: the feedback variant is defined for one recurrent "
                                 "layer (model.md §5.4), not %d" % len(self.recurrent_layers))
        else:
            self.recurrent_layers = []
        if self.family == "bst":
            if not self.bst_layers:
                self.bst_layers = [i for i in (0, 9) if i < self.layers]
            self.bst_layers = sorted(self.bst_layers)
            if self.d_model % 4:
                raise ValueError("model.d_model: must be a multiple of 4 for BST")
        else:
            self.bst_layers = []
        for i in self.recurrent_layers + self.bst_layers:
            if not 0 <= i < self.layers:
                raise ValueError("layer list names layer %d, outside [0, %d)" % (i, self.layers))
        return self


ModelConfig = dataclasses.make_dataclass(
    "ModelConfig", config_schema.dataclass_fields("model"), bases=(_ModelConfigMethods,),
    namespace={"__module__": __name__,
               "__doc__": "A run config's [model] table: one field per [model] key of brt-dist's key table "
                          "(variant, layers, d_model, ..., state_init_std, state_id_std, gate_bias_mean) "
                          "with its default; resolve() fills the layer lists as brt-dist does."})
