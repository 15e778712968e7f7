"""The PyTorch peer's view of a brt-dist config (docs/gpu.md, "The PyTorch peer"), without torch.

Files are read as launch/config/config.cpp reads them: `base = "other.toml"` or a list of bases
(`base = ["40m.toml", "forms/xl.toml"]`, the ladder's size x form files) applied in order
before the file's own keys; overrides are `section.key=value`, typed by the key. Every key
and value is checked against brt-dist's key schema, and PeerConfig's fields, types and
defaults are the schema's [model] keys: nothing here declares a key. The schema is
python/brt_dist/config_schema.py over config_keys.json, loaded by its path so that the peer
needs neither the package's h5py nor the brt-dist binary.
"""
import dataclasses
import importlib.util
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _load_schema():
    path = REPO / "python" / "brt_dist" / "config_schema.py"
    spec = importlib.util.spec_from_file_location("brt_dist_config_schema", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


schema = _load_schema()


class ConfigError(ValueError):
    """A config the peer (like brt-dist) refuses: the message names the file or key."""


def parse_override(key, text):
    """`text` as brt-dist's command line reads a value of `key` (launch/config/config.cpp
    apply_override): a string is plain text (quotes optional), a list may omit its brackets,
    anything else is a TOML value."""
    kind = schema.key(key)["type"]
    if kind == "string":
        return text[1:-1] if len(text) >= 2 and text[0] in "\"'" and text[-1] == text[0] else text
    if kind == "int_list" and "[" not in text:
        text = "[" + text + "]"
    try:
        return tomllib.loads("v = " + text)["v"]
    except tomllib.TOMLDecodeError:
        raise ConfigError("command line: %s: cannot read %r as %s" % (key, text, kind)) from None


def _bases(table, path):
    base = table.pop("base", None)
    if base is None:
        return []
    bases = [base] if isinstance(base, str) else base
    if not isinstance(bases, list) or not bases or not all(isinstance(b, str) for b in bases):
        raise ConfigError("%s: base: expected a file name string or a list of them, got %r" % (path, base))
    return bases


def flat_keys(keys, prefix=""):
    """A section's keys with nested tables as dotted names ([data] tasks.rate -> "tasks.rate"),
    as brt-dist's key table names them (data.tasks.*)."""
    out = {}
    for name, value in keys.items():
        if isinstance(value, dict):
            out.update(flat_keys(value, prefix + name + "."))
        else:
            out[prefix + name] = value
    return out


def read_toml(path, seen=()):
    """The file's keys over its bases' ({section: {key: value}}), unresolved."""
    path = Path(path)
    if path.resolve() in seen:
        raise ConfigError("%s: base files form a cycle" % path)
    try:
        table = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError("%s: no such config file" % path) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError("%s: %s" % (path, e)) from None
    merged = {}
    for base in _bases(table, path):
        for section, keys in read_toml(path.parent / base, seen + (path.resolve(),)).items():
            merged.setdefault(section, {}).update(keys)
    for section, keys in table.items():
        if not isinstance(keys, dict):
            raise ConfigError("%s: %s: unknown key (keys live in sections: [model], [optim], ...)" % (path, section))
        merged.setdefault(section, {}).update(flat_keys(keys))
    return merged


def load_config(path, overrides):
    """Every key ({section: {key: value}}): the schema's defaults, then the config file with its
    bases, then the `section.key=value` overrides; every key and value checked against the
    schema as brt-dist checks them. Unresolved, as brt-dist holds it before resolve()."""
    cfg = schema.defaults()
    for section, keys in read_toml(path).items():
        for name, value in keys.items():
            _check("%s: " % path, "%s.%s" % (section, name), value)
            cfg[section][name] = value
    for item in overrides:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or "." not in key:
            raise ConfigError("%r: overrides are section.key=value" % item)
        _check("command line: ", key, None)
        value = parse_override(key, value.strip())
        _check("command line: ", key, value)
        section, name = key.split(".", 1)
        cfg.setdefault(section, {})[name] = value
    return cfg


def _check(where, key, value):
    try:
        schema.key(key)
        if value is not None:
            schema.check_value(key, value)
    except (KeyError, ValueError) as e:
        raise ConfigError(where + (("%s: unknown key" % key) if isinstance(e, KeyError) else str(e))) from None


class _PeerMethods:
    """PeerConfig's behaviour; its fields are the schema's [model] keys (below)."""

    @classmethod
    def from_table(cls, table):
        """A run config's [model] table, resolved as core/model_config.cpp does (layer lists)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ValueError("model.%s: not a model key the peer knows" % unknown[0])
        cfg = cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in table.items()})
        fam = cfg.variant.split(":")[0]
        ok = (cfg.variant in ("slide", "xl") or
              (fam == "rec" and cfg.variant.split(":")[1:] in [[g, c] for g in ("fixed", "lstm") for c in ("skip", "dual")]) or
              (fam == "bst" and cfg.variant.split(":")[1:] in [[v, k] for v in ("sh", "mh", "mf") for k in ("s4d", "unstructured")]))
        if not ok:
            raise ValueError("model.variant: \"%s\" is not in the peer (slide, xl, rec:*, bst:*; feedback:* is not)"
                             % cfg.variant)
        if cfg.seq_len % cfg.window:
            raise ValueError("model.window: %d does not divide model.seq_len %d" % (cfg.window, cfg.seq_len))
        rec = sorted(cfg.recurrent_layers) or ([9, 19] if cfg.layers == 24 else [max(0, cfg.layers - 3)])
        bst = sorted(cfg.bst_layers) or [i for i in (0, 9) if i < cfg.layers]
        return dataclasses.replace(cfg, recurrent_layers=tuple(rec) if fam == "rec" else (),
                                   bst_layers=tuple(bst) if fam == "bst" else ())

    A = property(lambda s: s.heads * s.head_dim)
    T = property(lambda s: s.seq_len // s.window)
    Ds = property(lambda s: s.d_model // 4)                                    # model.md §7.1
    kind = property(lambda s: s.variant.split(":"))
    C = property(lambda s: {"sh": 1, "mh": s.heads, "mf": s.ctx_states}[s.kind[1]])


# The [model] keys of launch/config/config_keys.cpp with brt-dist's defaults (state_init_std,
# state_id_std and gate_bias_mean included: PeerModel.init_random honours them); lists as tuples.
PeerConfig = dataclasses.make_dataclass("PeerConfig", schema.dataclass_fields("model", list_type=tuple),
                                        bases=(_PeerMethods,), frozen=True, namespace={"__module__": __name__})
