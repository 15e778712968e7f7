"""Shared by the Hugging Face export tests (test_hf_export.py, test_hf_transformers.py): a tiny
run exported with `brt-dist export --hf`, and the folder loaded as transformers' remote-code
loader loads it (docs/huggingface.md)."""
import importlib
import re
import shutil
import sys
from pathlib import Path

from common import prepare, run, train

# transformers/dynamic_module_utils.py get_relative_imports: the files it copies from a model
# folder into its module cache are the ones these two patterns name, followed recursively.
RELATIVE_IMPORTS = [re.compile(r"^\s*import\s+\.(\S+)\s*$", re.M), re.compile(r"^\s*from\s+\.(\S+)\s+import", re.M)]


def exported_run(bin_path, work, variant, steps=8, data=None):
    """(data dir, checkpoint file, export folder) of `variant` trained `steps` steps; the export
    is given the checkpoint directory (resolved to its newest checkpoint, as eval resolves it)."""
    data = data or prepare(bin_path, work, "corpus", train_docs=4, validation_docs=2)
    ckpt = train(bin_path, work, variant, data, steps)
    folder = Path(work) / ("hf-" + variant.replace(":", "_"))
    run([bin_path, "export", "--hf", folder, ckpt.parent, "--quiet"])
    return data, ckpt, folder


def remote_code_files(folder, entry_modules=("configuration_brt", "modeling_brt")):
    """The .py files transformers would copy for the entry modules, by its own rule."""
    todo, found = list(entry_modules), set()
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        text = (Path(folder) / (name + ".py")).read_text()
        for pattern in RELATIVE_IMPORTS:
            todo.extend(pattern.findall(text))
    return sorted(found)


def load_remote_package(folder, cache, package):
    """Copies only what transformers would copy into cache/package (a fresh package, as its
    module cache is) and imports its configuration_brt and modeling_brt from there."""
    target = Path(cache) / package
    target.mkdir(parents=True)
    (target / "__init__.py").write_text("")
    for name in remote_code_files(folder):
        shutil.copy(Path(folder) / (name + ".py"), target / (name + ".py"))
    sys.path.insert(0, str(cache))
    try:
        configuration = importlib.import_module(package + ".configuration_brt")
        modeling = importlib.import_module(package + ".modeling_brt")
    finally:
        sys.path.remove(str(cache))
    return configuration, modeling, target
