"""Reading brt-dist checkpoints (docs/checkpoint-format.md) with h5py, verified exactly as the
C++ reader (checkpoint/reader.cpp) verifies them, with the same messages:

    ckpt = load_checkpoint("runs/tiny/ckpt/ckpt-00000600.h5")
    ckpt.config["model"]["d_model"], ckpt.step, ckpt.parameters["embed"].shape
    report = verify_checkpoint(path)      # what `brt-dist ckpt verify FILE` prints

A damaged file raises CorruptCheckpointError whose text is the C++ exception's text (the part
quoting HDF5's own error stack differs: h5py words it differently).
"""
import dataclasses
import os
import tomllib

import h5py
import numpy as np

from . import checksum
from .config import ModelConfig

FORMAT_NAME = "brt-dist-checkpoint"
FORMAT_VERSION = 2
TENSOR_MANIFEST = "tensor_manifest"
ATTRIBUTE_CHECKSUMS = "attribute_checksums"
_DTYPE_NAMES = {np.dtype("<f4"): "float32", np.dtype("<f8"): "float64",
                np.dtype("<i8"): "int64", np.dtype("<u8"): "uint64"}


class CheckpointError(RuntimeError):
    """Every failure of this module (checkpoint/types.h CheckpointError)."""


class CorruptCheckpointError(CheckpointError):
    """Missing, truncated, not HDF5, or damaged (a checksum, the manifest, an attribute)."""


class FormatVersionError(CheckpointError):
    """Not a brt-dist checkpoint, or written by a newer format version."""


@dataclasses.dataclass
class VerifyReport:
    """checkpoint/reader.h VerifyReport: ok is False on any damage, one problem per line."""
    ok: bool
    problems: list
    datasets: int = 0
    chunks: int = 0
    bytes: int = 0

    def lines(self, path):
        """The lines `brt-dist ckpt verify FILE` prints (launch/cli/commands/command_ckpt.cpp)."""
        out = ["DAMAGED: " + p for p in self.problems]
        out.append("%s: %s (%d datasets, %d chunks, %d bytes checked)" % (
            path, "OK" if self.ok else "DAMAGED", self.datasets, self.chunks, self.bytes))
        return out


@dataclasses.dataclass
class Checkpoint:
    """A loaded checkpoint. Tensor dicts are keyed by the name below their group (model.md §9
    names for `parameters`, e.g. "layers.1.state.wq"); all values are numpy arrays."""
    path: str
    format_version: int
    config_toml: str
    config: dict                 # the stored TOML, parsed
    step: int
    tokens_seen: int
    attributes: dict             # every root attribute (str, int, float)
    parameters: dict             # /model/*
    optimizer: dict              # /optim/*
    state: dict                  # /state/*: carried caches, Σ, SSM carry (model.md §8)
    data: dict                   # /data/*: the data cursor, step guard

    @property
    def model_config(self):
        return ModelConfig.from_config(self.config)

    @property
    def data_cursor(self):
        return self.data.get("cursor")


def _hdf5_reason(error):
    """The innermost part of h5py's message, where HDF5's cause sits ("... (truncated file:
    eof = ...)") - the C++ side quotes HDF5's error stack here, which h5py words differently."""
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    if "(" in text and text.endswith(")"):
        return text[text.index("(") + 1:-1]
    return text


def _attribute_kind_and_bytes(f, name):
    """h5util.cpp attribute_bytes: the kind letter and the value bytes that are hashed."""
    attr_id = f.attrs.get_id(name)
    dtype = attr_id.dtype
    if h5py.check_string_dtype(dtype) is not None:
        value = f.attrs[name]
        raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
        return "s", raw.split(b"\0", 1)[0]  # read as a C string, as read_attr_string does
    if dtype.kind in "iu" and dtype.itemsize == 8:
        kind, wire = ("u", "<u8") if dtype.kind == "u" else ("i", "<i8")
    elif dtype.kind == "f" and dtype.itemsize == 8:
        kind, wire = "d", "<f8"
    else:
        return "?", b""
    value = f.attrs[name]
    if isinstance(value, h5py.Empty):
        return kind, b""
    return kind, np.atleast_1d(np.asarray(value)).astype(wire).tobytes()


def _attr_string(f, name):
    """h5util.cpp read_attr_string: None when absent or not a string."""
    if name not in f.attrs or h5py.check_string_dtype(f.attrs.get_id(name).dtype) is None:
        return None
    value = f.attrs[name]
    value = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
    return value.split("\0", 1)[0]


def _attr_int(f, name):
    """h5util.cpp read_attr_int: None when absent or not an integer."""
    if name not in f.attrs or f.attrs.get_id(name).dtype.kind not in "iu":
        return None
    return int(np.atleast_1d(f.attrs[name])[0])


def _attr_u64s(obj, name):
    if name not in obj.attrs:
        return None
    value = obj.attrs[name]
    if isinstance(value, h5py.Empty):
        return []
    return [int(v) for v in np.atleast_1d(np.asarray(value)).astype(np.uint64)]


def _shape_string(shape):
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


@dataclasses.dataclass
class _TensorInfo:
    path: str                    # "/model/embed"
    dtype: np.dtype
    shape: tuple
    rows_per_chunk: int = 0
    stored_sums: list = None     # None: no checksum

    @property
    def n_chunks(self):
        return checksum.chunk_count(self.shape, self.rows_per_chunk) if self.stored_sums is not None else 0


class CheckpointReader:
    """checkpoint/reader.cpp CheckpointReader: the checks at open, then verified reads."""

    def __init__(self, path):
        self.path = str(path)
        self.file = None
        if not os.path.isfile(self.path):
            raise CorruptCheckpointError("checkpoint %s does not exist or is not a file" % self.path)
        try:
            self.file = h5py.File(self.path, "r")
        except OSError as e:
            raise CorruptCheckpointError("cannot open checkpoint %s (truncated, damaged or not HDF5): %s"
                                         % (self.path, _hdf5_reason(e))) from None
        try:
            self._open_checks()
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _damaged(self, problems):
        message = "checkpoint %s is damaged:" % self.path
        shown = min(len(problems), 8)
        for p in problems[:shown]:
            message += ("\n  " if shown > 1 else " ") + p
        if len(problems) > shown:
            message += "\n  ... and %d more" % (len(problems) - shown)
        raise CorruptCheckpointError(message)

    def where(self, dataset):
        return "checkpoint %s, dataset %s" % (self.path, dataset)

    # -- the constructor's checks, in its order
    def _open_checks(self):
        f = self.file
        try:
            names = sorted(f.attrs.keys())
            attrs = [(n,) + _attribute_kind_and_bytes(f, n) for n in names]
        except (OSError, KeyError, RuntimeError) as e:
            raise CorruptCheckpointError("checkpoint %s is damaged: its root group cannot be read (cannot list "
                                         "attributes (object header damaged?): %s)" % (self.path, _hdf5_reason(e))) from None
        self.attributes_verified = False
        self._check_attribute_table(attrs)
        fmt = _attr_string(f, "format")
        if fmt != FORMAT_NAME:
            raise FormatVersionError("%s is not a brt-dist checkpoint (root attribute 'format' is %s)"
                                     % (self.path, "missing" if fmt is None else "'%s'" % fmt))
        version = _attr_int(f, "format_version")
        if version is None:
            raise FormatVersionError("%s: root attribute 'format_version' is missing" % self.path)
        if version > FORMAT_VERSION or version < 1:
            raise FormatVersionError("checkpoint %s has format version %d; this build of brt-dist reads "
                                     "versions 1..%d (a newer brt-dist wrote it)"
                                     % (self.path, version, FORMAT_VERSION))
        self.format_version = version
        if version >= 2 and not self.attributes_verified:
            raise CorruptCheckpointError(
                "checkpoint %s is damaged: root attribute '%s' is missing (format version %d files always carry it)"
                % (self.path, ATTRIBUTE_CHECKSUMS, version))
        self._load_tensor_list()
        if version >= 2:
            self._check_manifest()

    def _check_attribute_table(self, attrs):
        table_entry = [a for a in attrs if a[0] == ATTRIBUTE_CHECKSUMS]
        if not table_entry:
            return  # version 1, or not a checkpoint: decided by the caller
        text = table_entry[0][2].decode("utf-8", "surrogateescape")
        table, problems = {}, []
        for line in text.split("\n")[:-1]:  # lines end in '\n'; a trailing fragment is ignored
            name, tab, digits = line.partition("\t")
            value = checksum.parse_hex64(digits) if tab else None
            if value is None:
                problems.append("the attribute checksum table has a malformed line '%s'" % line)
                continue
            table[name] = value
        for name, kind, data in attrs:
            if name == ATTRIBUTE_CHECKSUMS:
                continue
            if name not in table:
                problems.append("root attribute '%s' is not in the attribute checksum table" % name)
                continue
            if checksum.attribute_hash(name, kind, data) != table.pop(name):
                problems.append("root attribute '%s' does not match its checksum" % name)
        problems += ["root attribute '%s' is missing" % name for name in sorted(table)]
        if problems:
            self._damaged(problems)
        self.attributes_verified = True

    def _load_tensor_list(self):
        paths = []
        try:
            self.file.visititems(lambda name, obj: paths.append("/" + name)
                                 if isinstance(obj, h5py.Dataset) else None)
        except (OSError, KeyError, RuntimeError) as e:
            raise CorruptCheckpointError("checkpoint %s is damaged: cannot list datasets: %s"
                                         % (self.path, _hdf5_reason(e))) from None
        self.tensors = {}
        for path in sorted(paths):
            dataset = self._open_dataset(path)
            dtype = dataset.dtype
            if dtype.byteorder == "=":
                dtype = dtype.newbyteorder("<")
            if dtype not in _DTYPE_NAMES or dataset.ndim < 1:
                raise CorruptCheckpointError(self.where(path) + ": unsupported element type or rank")
            info = _TensorInfo(path, dtype, tuple(int(d) for d in dataset.shape))
            rows = _attr_int(dataset, "checksum_rows_per_chunk")
            sums = _attr_u64s(dataset, "checksum_chunks")
            if rows is not None and rows >= 1 and sums is not None:
                expected = checksum.chunk_count(info.shape, rows)
                if len(sums) != expected:
                    raise CorruptCheckpointError(self.where(path) + ": checksum_chunks has %d entries, expected %d"
                                                 % (len(sums), expected))
                info.rows_per_chunk, info.stored_sums = rows, sums
            self.tensors[path] = info

    def _open_dataset(self, path):
        try:
            return self.file[path]
        except (OSError, KeyError, RuntimeError) as e:
            raise CorruptCheckpointError(self.where(path) + ": cannot open (%s)" % _hdf5_reason(e)) from None

    def _whole_checksum(self, path):
        whole = _attr_u64s(self._open_dataset(path), "checksum")
        return whole[0] if whole is not None and len(whole) == 1 else None

    def _check_manifest(self):
        text = _attr_string(self.file, TENSOR_MANIFEST)
        if text is None:
            self._damaged(["root attribute '%s' is missing" % TENSOR_MANIFEST])
        manifest = {}
        for line in text.split("\n")[:-1]:
            name, _, entry = line.partition("\t")
            manifest[name] = entry
        problems = []
        for path, info in self.tensors.items():
            if path not in manifest:
                problems.append("dataset %s is not in the tensor manifest (a damaged name?)" % path)
                continue
            whole = self._whole_checksum(path)
            have = "%s\t%s\t%s" % (_DTYPE_NAMES[info.dtype], _shape_string(info.shape),
                                   "none" if whole is None else checksum.hex64(whole))
            entry = manifest.pop(path)
            if have != entry:
                problems.append("dataset %s does not match the tensor manifest (stored %s, manifest %s)"
                                % (path, have, entry))
        problems += ["dataset %s of the tensor manifest is missing" % name for name in sorted(manifest)]
        if problems:
            self._damaged(problems)

    # -- reading
    def _chunk_rows(self, info, chunk):
        first = chunk * info.rows_per_chunk
        return first, min(info.shape[0], first + info.rows_per_chunk)

    def _mismatch(self, info, chunk):
        first, end = self._chunk_rows(info, chunk)
        return self.where(info.path) + ": checksum mismatch in chunk %d (rows %d..%d) - the data is damaged" % (
            chunk, first, end - 1)

    @staticmethod
    def _non_finite_count(path, rows):
        """types.cpp count_non_finite: NaN/inf among the float values under /model, /optim and
        /state; the S4D carry's float32 elements hold float64 bytes (docs/bst.md)."""
        if not path.startswith(("/model/", "/optim/", "/state/")) or rows.dtype.kind != "f":
            return 0
        if rows.dtype == np.float32 and path.endswith(".ssm.carry"):
            rows = np.ascontiguousarray(rows).view(np.float64)
        return int(rows.size - np.count_nonzero(np.isfinite(rows)))

    def _non_finite(self, info, chunk, count):
        """reader.cpp non_finite: a NaN or inf parameter, optimizer or carried-state value is damage."""
        first, end = self._chunk_rows(info, chunk)
        return self.where(info.path) + (": %d non-finite values (NaN or inf) in chunk %d (rows %d..%d) - diverged "
                                        "training state, not a checkpoint to go on from" % (count, chunk, first, end - 1))

    def _read_rows(self, info, first, end):
        try:
            return self._open_dataset(info.path)[first:end]
        except (OSError, RuntimeError) as e:
            raise CorruptCheckpointError(self.where(info.path) + ": read failed (%s)" % _hdf5_reason(e)) from None

    def read(self, path, verify=True):
        """The whole tensor at `path` ("/model/embed"), every chunk verified (as
        CheckpointReader::read of the whole tensor: the first bad chunk raises)."""
        info = self.tensors.get(path)
        if info is None:
            raise CheckpointError(self.where(path) + ": no such dataset")
        values = self._read_rows(info, 0, info.shape[0])
        if not verify or values.size == 0:
            return values
        if info.stored_sums is None:
            raise CorruptCheckpointError(self.where(path) + ": has no checksum")
        sums = checksum.chunk_checksums(values, info.rows_per_chunk)
        for chunk, (got, stored) in enumerate(zip(sums, info.stored_sums)):
            if got != stored:
                raise CorruptCheckpointError(self._mismatch(info, chunk))
        return values

    def verify_all(self):
        """CheckpointReader::verify_all: every chunk of every dataset, problems collected."""
        report = VerifyReport(ok=True, problems=[])
        for path, info in self.tensors.items():
            report.datasets += 1
            if info.stored_sums is None:
                report.problems.append(self.where(path) + ": has no checksum")
                continue
            total = sum(info.stored_sums) & ((1 << 64) - 1)
            if self._whole_checksum(path) != total:
                report.problems.append(self.where(path) + ": checksum attribute disagrees with checksum_chunks")
            for chunk in range(info.n_chunks):
                report.chunks += 1
                try:
                    first, end = self._chunk_rows(info, chunk)
                    rows = self._read_rows(info, first, end)
                    report.bytes += rows.nbytes
                    if checksum.chunk_checksums(rows, info.rows_per_chunk, first)[0] != info.stored_sums[chunk]:
                        report.problems.append(self._mismatch(info, chunk))
                    elif self._non_finite_count(path, rows):
                        report.problems.append(self._non_finite(info, chunk, self._non_finite_count(path, rows)))
                except CheckpointError as e:
                    report.problems.append(str(e))
        report.ok = not report.problems
        return report

    def attribute_values(self):
        out = {}
        for name in sorted(self.file.attrs.keys()):
            value = self.file.attrs[name]
            if isinstance(value, bytes):
                value = value.decode("utf-8", "surrogateescape")
            elif isinstance(value, np.generic):
                value = value.item()
            elif isinstance(value, np.ndarray):
                value = value.tolist()
            out[name] = value
        return out


def verify_checkpoint(path):
    """checkpoint/tools.cpp verify(): the report `brt-dist ckpt verify` prints."""
    try:
        with CheckpointReader(path) as reader:
            return reader.verify_all()
    except CheckpointError as e:
        return VerifyReport(ok=False, problems=[str(e)])


def load_checkpoint(path, verify=True):
    """Everything in a checkpoint, every tensor and root attribute verified (docs/checkpoint-
    format.md §4, §4b). Raises CorruptCheckpointError / FormatVersionError as the C++ reader."""
    with CheckpointReader(path) as reader:
        groups = {"model": {}, "optim": {}, "state": {}, "data": {}}
        for tensor_path in reader.tensors:
            group, _, name = tensor_path.lstrip("/").partition("/")
            groups.setdefault(group, {})[name] = reader.read(tensor_path, verify=verify)
        attrs = reader.attribute_values()
        text = attrs.get("config_toml", "")
        return Checkpoint(path=str(path), format_version=reader.format_version, config_toml=text,
                          config=tomllib.loads(text) if text else {}, step=int(attrs.get("step", 0)),
                          tokens_seen=int(attrs.get("tokens_seen", 0)), attributes=attrs,
                          parameters=groups["model"], optimizer=groups["optim"], state=groups["state"],
                          data=groups["data"])
