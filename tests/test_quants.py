"""llmbook.quants against gguf-py's reference (de)quantizers, on random blocks.

Tolerance: exact equality everywhere. Our dequantizers compute each value with the same float32 operations in
the same order as gguf-py (and ggml's C reference), so no ulp slack is needed; a failure here is a real bug.
"""
import numpy as np
import pytest
import gguf
from gguf import GGMLQuantizationType as GQ

from llmbook.tensors import GGMLType, GGML_TYPES, QTensor
from llmbook.quants import dequantize, dequantize_rows, supported_types

# Byte offsets of the f16 scale fields in each block: random bytes there could be NaN/inf, so we set them.
F16_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q2_K": [80, 82],
              "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}


def random_blocks(name, n_blocks, rng):
    "Random bytes for `n_blocks` blocks of type `name`, with finite f16 scales in (-2, 2)."
    size = GGML_TYPES[GGMLType[name]].type_size
    raw = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    for off in F16_FIELDS[name]:
        raw[:, off:off + 2] = rng.uniform(-2, 2, n_blocks).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    return raw


@pytest.mark.parametrize("name", list(F16_FIELDS))
def test_dequantize_matches_gguf_py(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    raw = random_blocks(name, 2000, rng)
    bs = GGML_TYPES[GGMLType[name]].block_size
    ours = dequantize(QTensor(raw, GGMLType[name], (40, 50 * bs)))
    ref = gguf.quants.dequantize(raw, GQ[name]).reshape(40, 50 * bs)
    assert ours.dtype == np.float32 and ours.shape == (40, 50 * bs)
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("name,dtype", [("F32", np.float32), ("F16", np.float16)])
def test_dequantize_floats(name, dtype):
    x = np.random.default_rng(0).standard_normal((7, 9)).astype(dtype)
    raw = x.view(np.uint8).reshape(-1)
    ours = dequantize(QTensor(raw, GGMLType[name], x.shape))
    np.testing.assert_array_equal(ours, gguf.quants.dequantize(raw, GQ[name]).reshape(x.shape))


def test_dequantize_bf16_all_bit_patterns():
    raw = np.arange(65536, dtype=np.uint16)           # every bf16 value, NaNs and infs included
    ours = dequantize(QTensor(raw.view(np.uint8), GGMLType.BF16, (256, 256)))
    ref = gguf.quants.dequantize(raw.view(np.uint8), GQ.BF16).reshape(256, 256)
    np.testing.assert_array_equal(ours.view(np.uint32), ref.view(np.uint32))


def test_dequantize_q8_k():
    "gguf-py has no Q8_K; its layout is f32 d, 256 int8, 16 int16 sums: value = d * q."
    rng = np.random.default_rng(8)
    n = 50
    d = rng.uniform(-1, 1, n).astype(np.float32)
    q = rng.integers(-128, 128, (n, 256)).astype(np.int8)
    bsums = q.reshape(n, 16, 16).sum(-1).astype(np.int16)
    raw = np.concatenate([d.view(np.uint8).reshape(n, 4), q.view(np.uint8), bsums.view(np.uint8).reshape(n, 32)], axis=1)
    ours = dequantize(QTensor(raw, GGMLType.Q8_K, (n * 256,)))
    np.testing.assert_array_equal(ours, (d[:, None] * q.astype(np.float32)).reshape(-1))


def test_supported_types_and_errors():
    assert set(supported_types()) >= {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"}
    for name in ["IQ4_NL", "IQ2_XXS", "TQ2_0", "MXFP4", "I32"]:
        info = GGML_TYPES[GGMLType[name]]
        qt = QTensor(np.zeros(info.type_size * 2, np.uint8), GGMLType[name], (2 * info.block_size,))
        with pytest.raises(NotImplementedError, match=name):
            dequantize(qt)
    with pytest.raises(TypeError):
        dequantize(np.zeros(4, np.float32))


def test_dequantize_rows():
    rng = np.random.default_rng(3)
    raw = random_blocks("Q4_K", 6 * 4, rng)
    qt = QTensor(raw, GGMLType.Q4_K, (6, 1024))
    full = dequantize(qt)
    np.testing.assert_array_equal(dequantize_rows(qt, [4, 0, 4]), full[[4, 0, 4]])
    np.testing.assert_array_equal(dequantize_rows(qt, 2), full[2])
    np.testing.assert_array_equal(dequantize_rows(qt, slice(1, 3)), full[1:3])
    np.testing.assert_array_equal(dequantize_rows(qt, -1), full[-1])
    with pytest.raises(IndexError, match="6 rows"):
        dequantize_rows(qt, [6])
    with pytest.raises(ValueError, match="2-D"):
        dequantize_rows(QTensor(raw, GGMLType.Q4_K, (6 * 1024,)), [0])
