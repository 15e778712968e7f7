"""The checkpoint checksums of docs/checkpoint-format.md §4 and §4b, bit for bit as
checkpoint/checksum.cpp computes them (all arithmetic mod 2^64).

Tensors: term(i, b) = fmix64(b + i * K) for the element of row-major flat index i and raw bits
b (zero-extended to 64 bits); a chunk's checksum is the sum of its terms; chunks are runs of
`rows_per_chunk` rows of the leading dimension.
Attributes: a chained fmix64 over the name, the kind letter and the value bytes in 8-byte
little-endian words (the last zero-padded).
"""
import numpy as np

K = 0x9E3779B97F4A7C15          # kChecksumIndexKey
CHUNK_ELEMS = 1 << 20           # kChecksumChunkElems: target elements per chunk
ALGORITHM = "sum-fmix64-rows-v1"
_M64 = (1 << 64) - 1


def fmix64_array(x):
    """MurmurHash3's finaliser on a uint64 array (wrapping multiplies)."""
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xFF51AFD7ED558CCD)
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xC4CEB9FE1A85EC53)
    return x ^ (x >> np.uint64(33))


def fmix64(x):
    """fmix64 on one Python int."""
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _M64
    return x ^ (x >> 33)


def row_elems(shape):
    n = 1
    for d in shape[1:]:
        n *= int(d)
    return n


def canonical_rows_per_chunk(shape):
    """checksum.cpp canonical_chunk_grid: max(1, CHUNK_ELEMS / product(shape[1:]))."""
    per_row = row_elems(shape)
    rows = CHUNK_ELEMS // per_row if per_row > 0 else CHUNK_ELEMS
    return max(1, rows)


def chunk_count(shape, rows_per_chunk):
    return (int(shape[0]) + rows_per_chunk - 1) // rows_per_chunk


def _element_bits(values):
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.dtype.itemsize == 4:
        return flat.view(np.uint32).astype(np.uint64)
    if flat.dtype.itemsize == 8:
        return flat.view(np.uint64)
    raise ValueError("checksums cover 4- and 8-byte elements only, not %s" % flat.dtype)


def chunk_checksums(values, rows_per_chunk, first_row=0, first_chunk=None):
    """Per-chunk sums of the rows in `values` (a run of whole rows starting at row `first_row`
    of the full tensor, whose shape beyond dim 0 equals values.shape[1:]); returns a list of
    Python ints, one per chunk touched."""
    bits = _element_bits(values)
    per_row = row_elems(values.shape) if values.ndim > 1 else 1
    first_index = np.uint64(first_row * per_row)
    with np.errstate(over="ignore"):
        index = np.arange(bits.size, dtype=np.uint64) + first_index
        terms = fmix64_array(bits + index * np.uint64(K))
    chunk_elems = rows_per_chunk * per_row
    # The run starts on a chunk boundary when called per chunk; handle the general case too.
    offset = (first_row % rows_per_chunk) * per_row
    sums, start = [], 0
    while start < bits.size:
        end = min(bits.size, start + chunk_elems - (offset if start == 0 else 0))
        sums.append(int(np.sum(terms[start:end], dtype=np.uint64)))
        start = end
    return sums


def tensor_checksum(values, rows_per_chunk=None):
    """(rows_per_chunk, per-chunk sums, whole-tensor checksum) of a whole tensor, as the
    writer stores them in `checksum_rows_per_chunk`, `checksum_chunks` and `checksum`."""
    if values.ndim < 1:
        raise ValueError("checkpoint tensors need rank >= 1")
    rows = rows_per_chunk or canonical_rows_per_chunk(values.shape)
    sums = chunk_checksums(values, rows) if values.size else [0] * chunk_count(values.shape, rows)
    return rows, sums, sum(sums) & _M64


def _mix_words(h, data):
    for at in range(0, len(data), 8):
        word = int.from_bytes(data[at:at + 8].ljust(8, b"\0"), "little")
        h = (fmix64(h ^ word) + K) & _M64
    return h


def attribute_hash(name, kind, value_bytes):
    """checksum.cpp attribute_hash: kind is 's', 'i', 'd', 'u' (or '?' for other types)."""
    name_bytes = name.encode()
    h = fmix64((len(name_bytes) + K) & _M64)
    h = _mix_words(h, name_bytes)
    h = _mix_words(h, kind.encode())
    h = (fmix64(h ^ len(value_bytes)) + K) & _M64
    return _mix_words(h, value_bytes)


def hex64(value):
    """The form the checksum tables store: 16 lowercase hex digits."""
    return "%016x" % value


def parse_hex64(text):
    """checksum.cpp parse_hex64: exactly 16 lowercase hex digits, else None."""
    if len(text) != 16 or any(c not in "0123456789abcdef" for c in text):
        return None
    return int(text, 16)
