#!/usr/bin/python3
"""The Python package declares no config key: brt_dist.config_schema is
`brt-dist config keys --json` (its checked-in copy, config_keys.json), ModelConfig's fields,
types and defaults are the schema's [model] keys, and ModelConfig resolves every shipped
config (configs/*.toml, read through `brt-dist config show`) and the default layer lists as
brt-dist does; model.state_init_std, state_id_std and gate_bias_mean are read and, with
PyTorch, honoured by a fresh initialisation.  usage: test_config_schema.py BRT_DIST  (~2 s)"""
import dataclasses
import json
import math
import sys
import tomllib

from common import REPO, check, run

from brt_dist import ModelConfig, config_schema
from brt_dist.config import VARIANTS

try:
    import torch
except ImportError:
    torch = None


def show(brt, name, *overrides):
    """`brt-dist config show configs/NAME.toml OVERRIDES` as a dict."""
    return tomllib.loads(run([brt, "config", "show", REPO / "configs" / (name + ".toml"), *overrides]))


def test_schema_is_the_key_table(brt):
    live = json.loads(run([brt, "config", "keys", "--json"]))
    check(config_schema.schema() == live, "config_keys.json is not `brt-dist config keys --json` "
          "(ctest -R config_keys_json_current shows the difference)")
    check(VARIANTS == config_schema.key("model.variant")["allowed"], "VARIANTS")


def test_model_config_fields_are_the_schema(brt):
    fields = dataclasses.fields(ModelConfig)
    model_keys = config_schema.keys("model")
    check([f.name for f in fields] == [k["name"] for k in model_keys],
          "ModelConfig's fields %s are not the [model] keys" % [f.name for f in fields])
    default = ModelConfig()
    for k in model_keys:
        value = getattr(default, k["name"])
        check(value == k["default"] and type(value) is config_schema.PYTHON_TYPES[k["type"]],
              "ModelConfig().%s = %r, the schema's default %r" % (k["name"], value, k["default"]))
    for name in ("state_init_std", "state_id_std", "gate_bias_mean"):
        check(hasattr(default, name), "ModelConfig lacks " + name)


def test_shipped_configs_resolve_as_brt_dist(brt):
    """brt-dist's resolved [model] of every shipped config is a fixed point of ModelConfig."""
    names = sorted(p.stem for p in (REPO / "configs").glob("*.toml"))
    check(len(names) >= 63, "configs/: %d files" % len(names))
    for name in names:
        shown = show(brt, name)["model"]
        cfg = ModelConfig.from_config({"model": shown})
        for key, value in shown.items():
            check(getattr(cfg, key) == value, "%s: model.%s = %r, brt-dist %r" % (name, key, getattr(cfg, key), value))
    print("  %d configs: ModelConfig resolves each as brt-dist does" % len(names))


def test_default_layer_lists_as_brt_dist(brt):
    """Layer lists left empty are filled as core/model_config.cpp fills them; the same configs fail."""
    cases = 0
    tiny = show(brt, "tiny")["model"]
    for variant in ("slide", "rec:fixed:skip", "feedback:lstm:dual", "bst:mf:s4d"):
        for layers in (2, 12, 24):
            overrides = ["model.variant=" + variant, "model.layers=%d" % layers]
            table = dict(tiny, variant=variant, layers=layers, recurrent_layers=[], bst_layers=[])
            try:
                mine = ModelConfig.from_config({"model": table})
            except ValueError as e:
                mine = e
            try:
                theirs = show(brt, "tiny", *overrides)["model"]
            except AssertionError as e:
                theirs = e
            if isinstance(theirs, Exception) or isinstance(mine, Exception):
                check(isinstance(theirs, Exception) and isinstance(mine, Exception),
                      "%s, %d layers: brt-dist %s, Python %s" % (variant, layers, theirs, mine))
                continue
            for key in ("recurrent_layers", "bst_layers"):
                check(getattr(mine, key) == theirs[key],
                      "%s, %d layers: %s %r, brt-dist %r" % (variant, layers, key, getattr(mine, key), theirs[key]))
            cases += 1
    check(cases >= 10, "only %d cases resolved" % cases)


def test_state_scales(brt):
    scales = ["model.state_init_std=0.5", "model.state_id_std=2", "model.gate_bias_mean=-1.5"]
    shown = show(brt, "tiny", "model.variant=rec:fixed:dual", "model.state_size=512", *scales)
    cfg = ModelConfig.from_config(shown)
    check((cfg.state_init_std, cfg.state_id_std, cfg.gate_bias_mean) == (0.5, 2.0, -1.5),
          "the state scales were not read: %s" % cfg)
    if torch is None:
        print("  PyTorch missing: the initialisation part is skipped")
        return
    from brt_dist.torch.model import BrtModel
    params = BrtModel.initialised(cfg).state_dict()
    layer = "layers.%d.state." % cfg.recurrent_layers[0]
    for name, mean, std in (("ids", 0.0, 2.0), ("init", 0.0, 0.5), ("gate.bias", -1.5, 0.1), ("gate2.bias", -1.5, 0.1)):
        p = params[layer + name].double()
        n = p.numel()
        check(abs(float(p.mean()) - mean) < 5 * std / math.sqrt(n) and abs(float(p.std()) / std - 1) < 0.1,
              "%s: mean %.3f std %.3f over %d, expected N(%g, %g)" % (name, float(p.mean()), float(p.std()), n,
                                                                     mean, std))


def main():
    brt = sys.argv[1]
    for test in (test_schema_is_the_key_table, test_model_config_fields_are_the_schema,
                 test_shipped_configs_resolve_as_brt_dist, test_default_layer_lists_as_brt_dist, test_state_scales):
        test(brt)
        print("ok  " + test.__name__)


if __name__ == "__main__":
    main()
