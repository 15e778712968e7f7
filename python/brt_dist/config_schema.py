"""brt-dist's config keys, as its key table (launch/config/config_keys.cpp) declares them.

config_keys.json beside this file is `brt-dist config keys --json`, checked in so that the
package works without the binary; ctest's config_keys_json_current fails when the two differ
and prints the one command that refreshes it. Nothing here declares a key: the Python
package's ModelConfig and bench/peer's PeerConfig take their fields, types and defaults from
this schema.

Standard library only, and no imports from the package: bench/peer loads this file by its
path (the peer runs where h5py, which the package's __init__ imports, may be missing).
"""
import copy
import dataclasses
import functools
import json
from pathlib import Path

SCHEMA_PATH = Path(__file__).resolve().with_name("config_keys.json")
# The schema's text when this module lives without config_keys.json beside it: `brt-dist
# export --hf` writes a copy of this file into a Hugging Face folder, and transformers' remote-code
# loader copies only the .py files, so the export replaces this line with the schema itself
# (launch/cli/export/hf_python.cpp).
EMBEDDED_SCHEMA = None
# The schema's type names and the Python types a TOML reader gives for them.
PYTHON_TYPES = {"int": int, "float": float, "string": str, "bool": bool, "int_list": list}


@functools.cache   # read once: the file does not change while a program runs
def _read():
    return json.loads(EMBEDDED_SCHEMA if EMBEDDED_SCHEMA is not None else SCHEMA_PATH.read_text(encoding="utf-8"))


def schema():
    """The whole schema (a copy): {"about": ..., "keys": [{"key", "section", "name", "type",
    "default", ["min"], ["max"], ["allowed"], "help"}, ...]} in the key table's order."""
    return copy.deepcopy(_read())


def keys(section=None):
    """Every key's entry (a copy), or those of one section ("model", "optim", ...)."""
    return [copy.deepcopy(k) for k in _read()["keys"] if section is None or k["section"] == section]


def key(name):
    """One key's entry by its dotted name ("model.d_model"); KeyError when there is none."""
    for k in _read()["keys"]:
        if k["key"] == name:
            return copy.deepcopy(k)
    raise KeyError("%s: not a brt-dist config key" % name)


def defaults():
    """{section: {name: default}}: what a config that sets nothing starts from (before brt-dist's
    resolve() fills the derived values, e.g. an empty model.recurrent_layers)."""
    out = {}
    for k in keys():
        out.setdefault(k["section"], {})[k["name"]] = k["default"]
    return out


def dataclass_fields(section, list_type=list):
    """(name, type, field) triples of a section's keys for dataclasses.make_dataclass, with the
    schema's defaults; int_list keys become `list_type` (a tuple for frozen dataclasses)."""
    fields = []
    for k in keys(section):
        kind = list_type if k["type"] == "int_list" else PYTHON_TYPES[k["type"]]
        default = k["default"]
        if kind is list:
            field = dataclasses.field(default_factory=lambda d=tuple(default): list(d))
        else:
            field = dataclasses.field(default=kind(default) if kind is tuple else default)
        fields.append((k["name"], kind, field))
    return fields


def check_value(name, value):
    """Raises ValueError naming the key when `value` does not have the key's type, lies outside
    its bounds or is not one of its words, as brt-dist would refuse it. model.variant's words
    are checked by ModelConfig.resolve(), as brt-dist checks them."""
    k = key(name)
    kind = k["type"]
    ok = {"int": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          "string": lambda v: isinstance(v, str),
          "bool": lambda v: isinstance(v, bool),
          "int_list": lambda v: isinstance(v, (list, tuple)) and all(
              isinstance(x, int) and not isinstance(x, bool) for x in v)}[kind](value)
    if not ok:
        raise ValueError("%s: expected %s, got %r" % (name, kind, value))
    for v in (value if kind == "int_list" else [value]):
        if "min" in k and v < k["min"]:
            raise ValueError("%s: %r must be >= %r" % (name, v, k["min"]))
        if "max" in k and v > k["max"]:
            raise ValueError("%s: %r must be <= %r" % (name, v, k["max"]))
    if kind == "string" and k.get("allowed") and name != "model.variant" and value not in k["allowed"]:
        raise ValueError("%s: \"%s\" is not one of %s" % (name, value, " | ".join(k["allowed"])))
