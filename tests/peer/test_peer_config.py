#!/usr/bin/python3
"""The PyTorch peer reads configs as brt-dist does and declares no key
(bench/peer/peer_config.py, no PyTorch needed): PeerConfig's fields and defaults are the key
schema's [model] keys; every shipped config (configs/*.toml, the ladder's `base = [size, form]`
files included) loads to brt-dist's values (`brt-dist config show`) for every key, the keys
brt-dist's resolve() derives compared resolved; overrides are typed by their key, and unknown
keys and bad values are refused naming them.  usage: test_peer_config.py BRT_DIST  (~2 s)"""
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "peer"))

import peer_config  # noqa: E402

schema = peer_config.schema


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def brt_show(brt, path, *overrides):
    done = subprocess.run([brt, "config", "show", str(path), *overrides], capture_output=True, text=True)
    check(done.returncode == 0, "brt-dist config show %s: %s" % (path, done.stderr))
    return tomllib.loads(done.stdout)


def refused(path, overrides, words):
    try:
        peer_config.load_config(path, overrides)
    except peer_config.ConfigError as e:
        check(words in str(e), "%r does not say %r" % (str(e), words))
        return
    raise AssertionError("%s %s was accepted" % (path, overrides))


def test_fields_are_the_schema():
    fields = peer_config.PeerConfig.__dataclass_fields__
    keys = schema.keys("model")
    check(list(fields) == [k["name"] for k in keys], "PeerConfig's fields %s" % list(fields))
    default = peer_config.PeerConfig()
    for k in keys:
        want = tuple(k["default"]) if k["type"] == "int_list" else k["default"]
        check(getattr(default, k["name"]) == want, "PeerConfig().%s = %r, schema %r"
              % (k["name"], getattr(default, k["name"]), want))


def test_shipped_configs_load_as_brt_dist(brt):
    paths = sorted((REPO / "configs").glob("*.toml"))
    for path in paths:
        mine, theirs = peer_config.load_config(path, []), brt_show(brt, path)
        for section, keys in theirs.items():
            for name, value in peer_config.flat_keys(keys).items():
                got = mine[section][name]
                if section == "optim" and name == "total_steps" and got == 0:
                    got = mine["train"]["steps"]          # resolve(): 0 = train.steps
                run_dir = mine.get("run", {}).get("dir", "").replace("{config}", path.stem)  # docs/training.md
                if (section, name) == ("run", "dir"):
                    got = run_dir                          # load_run_config: {config} is the file's name
                if run_dir and (section, name) == ("log", "metrics_path") and got == "":
                    got = run_dir + "/metrics.jsonl"
                if run_dir and (section, name) == ("checkpoint", "dir") and got == "":
                    got = run_dir + "/ckpt"
                if section == "optim" and name == "clip_norm" and got < 0:
                    got = 1.0 if mine["optim"]["kind"] == "adamw" else 0.0   # the kind's default
                if section == "model" and name in ("recurrent_layers", "bst_layers"):
                    if mine["model"]["variant"].startswith("feedback"):
                        continue                           # not in the peer
                    got = list(getattr(peer_config.PeerConfig.from_table(mine["model"]), name))
                check(got == value, "%s: %s.%s = %r, brt-dist %r" % (path.name, section, name, got, value))
    check(len(paths) >= 63, "configs/: %d files" % len(paths))
    print("  %d configs load to brt-dist's values" % len(paths))


def test_overrides_and_refusals():
    tiny = REPO / "configs" / "tiny.toml"
    cfg = peer_config.load_config(tiny, ["data.path=123", "model.recurrent_layers=1,2", "model.variant=bst:sh:s4d",
                                         "optim.lr=1e-3", "model.state_init_std=0", "train.device='cuda'"])
    check(cfg["data"]["path"] == "123", "a string key's value is text")
    check(cfg["model"]["recurrent_layers"] == [1, 2], "a list without brackets")
    check(cfg["model"]["variant"] == "bst:sh:s4d" and cfg["optim"]["lr"] == 1e-3, "typed overrides")
    check(cfg["train"]["device"] == "cuda", "quotes are optional")
    refused(tiny, ["train.lr=0.1"], "command line: train.lr: unknown key")
    refused(tiny, ["model.layers=0"], "model.layers: 0 must be >= 1")
    refused(tiny, ["train.precision=fp8"], "is not one of fp32 | fp64 | bf16")
    refused(tiny, ["model.layers=abc"], "cannot read")
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "bad.toml"
        bad.write_text('base = ["%s", 3]\n' % tiny)
        refused(bad, [], "base: expected a file name string or a list of them")
        bad.write_text('base = "%s"\n[model]\nd_modle = 3\n' % tiny)
        refused(bad, [], "model.d_modle: unknown key")
        bad.write_text('base = "%s"\n[model]\nd_model = "wide"\n' % tiny)
        refused(bad, [], "model.d_model: expected int")


def main():
    brt = sys.argv[1]
    test_fields_are_the_schema()
    print("ok  test_fields_are_the_schema")
    test_shipped_configs_load_as_brt_dist(brt)
    print("ok  test_shipped_configs_load_as_brt_dist")
    test_overrides_and_refusals()
    print("ok  test_overrides_and_refusals")


if __name__ == "__main__":
    main()
