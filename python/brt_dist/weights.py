"""Writing weights out of Python:

  save_weights(model_or_params, path, config)  an HDF5 file in the checkpoint format
      (docs/checkpoint-format.md, version 2: /model/<model.md §9 name> float32, every dataset
      and root attribute checksummed, the tensor manifest and attribute table), which
      `brt-dist ckpt verify` accepts and a weights-only load (`checkpoint.init_from=FILE`)
      can start from. It holds no optimizer state, carried state or data cursor.
  export_safetensors(model_or_params, path)    the safetensors format, written by hand: an
      8-byte little-endian header length, a JSON header, the raw little-endian bytes.
"""
import json
import os

import h5py
import numpy as np

from . import checksum

FORMAT_NAME = "brt-dist-checkpoint"
FORMAT_VERSION = 2
_SAFETENSORS_DTYPES = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<f2"): "F16",
                       np.dtype("<i8"): "I64", np.dtype("<i4"): "I32", np.dtype("<u8"): "U64"}


def _to_numpy(model_or_params):
    """{name: numpy array} from a torch module (its state_dict: model.md §9 names for BrtModel),
    a dict of tensors/arrays, or a brt_dist.Checkpoint (its parameters). bfloat16 tensors are
    returned as ("BF16", uint16 bits) pairs for safetensors and float32 for checkpoints."""
    if hasattr(model_or_params, "parameters") and isinstance(getattr(model_or_params, "parameters"), dict):
        model_or_params = model_or_params.parameters        # a Checkpoint
    if hasattr(model_or_params, "state_dict"):
        model_or_params = model_or_params.state_dict()
    out = {}
    for name, value in model_or_params.items():
        if hasattr(value, "detach"):                          # a torch tensor
            value = value.detach().cpu()
            if str(value.dtype) == "torch.bfloat16":       # numpy has no bfloat16: keep the bits
                import torch
                out[name] = ("BF16", value.view(dtype=torch.int16).numpy().view(np.uint16))
                continue
            value = value.numpy()
        out[name] = np.ascontiguousarray(value)
    return out


def _bf16_to_float32(bits):
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string is JSON's string syntax for these texts
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError("cannot write %r as a TOML value" % (value,))


def _toml_keys(keys, prefix=""):
    """A table's keys, nested tables as dotted keys ([data] tasks.rate = 0.05: data.tasks.*)."""
    lines = []
    for k, v in keys.items():
        if isinstance(v, dict):
            lines += _toml_keys(v, prefix + k + ".")
        else:
            lines.append("%s%s = %s" % (prefix, k, _toml_value(v)))
    return lines


def config_to_toml(config):
    """A run config {table: {key: value}} as TOML text (the subset brt-dist configs use)."""
    lines = []
    for table, keys in config.items():
        if not isinstance(keys, dict):
            lines.append("%s = %s" % (table, _toml_value(keys)))
            continue
        lines.append("\n[%s]" % table)
        lines += _toml_keys(keys)
    return "\n".join(lines).lstrip("\n") + "\n"


def _config_text(config):
    if hasattr(config, "config_toml"):                          # a Checkpoint
        return config.config_toml
    if isinstance(config, str):
        return config
    if hasattr(config, "__dataclass_fields__"):                 # a ModelConfig
        import dataclasses
        return config_to_toml({"model": dataclasses.asdict(config)})
    return config_to_toml(config)


def save_weights(model_or_params, path, config, step=0, tokens_seen=0, tokenizer_hash=""):
    """Writes the parameters as /model/<name> float32 datasets of a format-2 checkpoint at
    `path` (written to path + ".tmp", then renamed, as checkpoint/writer.cpp commits).
    config: the run config the weights belong to (TOML text, a dict, a ModelConfig or a
    Checkpoint whose stored text is reused); it is stored as `config_toml`."""
    params = _to_numpy(model_or_params)
    if not tokenizer_hash and hasattr(config, "attributes"):    # a Checkpoint: its tokenizer
        tokenizer_hash = config.attributes.get("tokenizer_hash", "")
    manifest, hashes = {}, {}
    tmp = str(path) + ".tmp"

    def put_attr(f, name, value, kind):
        if kind == "s":
            f.attrs.create(name, value, dtype=h5py.string_dtype("utf-8"))
            data = value.encode("utf-8")
        else:
            f.attrs.create(name, np.int64(value), dtype="<i8")
            data = np.int64(value).astype("<i8").tobytes()
        hashes[name] = checksum.attribute_hash(name, kind, data)

    with h5py.File(tmp, "w", libver=("v108", "v108")) as f:
        for name in sorted(params):
            value = params[name]
            if isinstance(value, tuple):                          # bfloat16 bits
                value = _bf16_to_float32(value[1])
            value = np.ascontiguousarray(value, dtype="<f4")
            if value.ndim == 0:
                value = value.reshape(1)                          # rank >= 1 (format §2)
            rows, sums, whole = checksum.tensor_checksum(value)
            dataset = f.create_dataset("model/" + name, data=value)
            dataset.attrs.create("checksum", np.uint64(whole), dtype="<u8")
            dataset.attrs.create("checksum_chunks", np.array(sums, dtype="<u8"))
            dataset.attrs.create("checksum_rows_per_chunk", np.int64(rows), dtype="<i8")
            shape = "[" + ", ".join(str(d) for d in value.shape) + "]"
            manifest["/model/" + name] = "float32\t%s\t%s" % (shape, checksum.hex64(whole))
        for name, value, kind in (("format", FORMAT_NAME, "s"), ("format_version", FORMAT_VERSION, "i"),
                                  ("step", step, "i"), ("checksum_algorithm", checksum.ALGORITHM, "s"),
                                  ("checksum_chunk_elems", checksum.CHUNK_ELEMS, "i"),
                                  ("tokens_seen", tokens_seen, "i"), ("config_toml", _config_text(config), "s"),
                                  ("tokenizer_hash", tokenizer_hash, "s"), ("world_size", 1, "i"),
                                  ("dp", 1, "i"), ("tp", 1, "i"), ("written_by", "brt_dist.save_weights", "s")):
            put_attr(f, name, value, kind)
        # The manifest and the attribute table last: they describe everything written before.
        put_attr(f, "tensor_manifest", "".join("%s\t%s\n" % kv for kv in sorted(manifest.items())), "s")
        table = "".join("%s\t%s\n" % (n, checksum.hex64(h)) for n, h in sorted(hashes.items()))
        f.attrs.create("attribute_checksums", table, dtype=h5py.string_dtype("utf-8"))
    os.replace(tmp, path)
    return str(path)


def export_safetensors(model_or_params, path, metadata=None):
    """Writes the parameters (model.md §9 names) as a .safetensors file; dtypes are kept
    (F32, F64, BF16, ...). metadata: optional {str: str} stored under "__metadata__"."""
    params = _to_numpy(model_or_params)
    header, blobs, offset = {}, [], 0
    for name in sorted(params):
        value = params[name]
        if isinstance(value, tuple):
            dtype, value = value
        else:
            value = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))
            dtype = _SAFETENSORS_DTYPES.get(value.dtype)
            if dtype is None:
                raise TypeError("%s: no safetensors dtype for %s" % (name, value.dtype))
        data = value.tobytes()
        header[name] = {"dtype": dtype, "shape": list(value.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)                   # the format allows trailing spaces; aligns the data
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for data in blobs:
            f.write(data)
    return str(path)


def read_safetensors(path):
    """{name: numpy array} of a safetensors file (BF16 as float32), and its metadata."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        raw = f.read()
    names = {v: k for k, v in _SAFETENSORS_DTYPES.items()}
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        chunk = raw[start:end]
        if entry["dtype"] == "BF16":
            value = _bf16_to_float32(np.frombuffer(chunk, dtype="<u2"))
        else:
            value = np.frombuffer(chunk, dtype=names[entry["dtype"]])
        out[name] = value.reshape(entry["shape"])
    return out, header.get("__metadata__", {})
