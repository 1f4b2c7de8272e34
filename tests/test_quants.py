"""llmbook.quants (chapter 03: the dequantizers, the classic quantizers) and llmbook.quantize's `quantize` (chapter 21:
the K-quants' searches besides) against gguf-py's reference (de)quantizers and llama.cpp's own (ggml's C reference
functions, recorded in tests/fixtures/quants_ggml.json by tools/make_quant_fixtures.py), on random blocks.

Tolerance: exact equality everywhere (bit for bit for floats, byte for byte for blocks). Our code computes each
value with the same float32 operations in the same order as the references, so no ulp slack is needed; a
failure here is a real bug.
"""
import base64, json
from pathlib import Path
import numpy as np
import pytest
import gguf
from gguf import GGMLQuantizationType as GQ

from llmbook.tensors import GGMLType, GGML_TYPES, QTensor
from llmbook.gguf import GGUFFile, GGUFWriter
import llmbook.quants as quants
from llmbook.quants import dequantize, dequantize_rows, _supported_types
from llmbook.quantize import quantize                 # chapter 03's, with chapter 21's K-quants

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
    assert set(_supported_types()) >= {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS", "MXFP4"}
    for name in ["IQ3_S", "IQ2_XXS", "TQ2_0", "IQ1_S", "I32"]:
        info = GGML_TYPES[GGMLType[name]]
        qt = QTensor(np.zeros(info.type_size * 2, np.uint8), GGMLType[name], (2 * info.block_size,))
        with pytest.raises(NotImplementedError, match=name):
            dequantize(qt)
    with pytest.raises(TypeError):
        dequantize(np.zeros(4, np.float32))


def test_block_layouts_have_ggmls_sizes():
    "Each block dtype of chapter 03 is exactly as long as ggml's block of that type (numpy packs fields, no padding)."
    blocks = {name[6:]: getattr(quants, name) for name in dir(quants) if name.startswith("BLOCK_")}
    assert set(blocks) >= {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
                           "IQ4_NL", "IQ4_XS", "MXFP4"}
    for name, dtype in blocks.items():
        assert dtype.itemsize == GGML_TYPES[GGMLType[name]].type_size, name


def test_bit_packing_round_trips():
    "pack_bits inverts unpack_bits for every (bits, group) the types use; _pack_scales_k4 inverts unpack_scales_k4."
    rng = np.random.default_rng(0)
    r = rng.integers(0, 256, (5, 64), dtype=np.uint8)
    for bits, group in [(1, 32), (2, 32), (4, 16), (4, 32), (4, 64), (2, 4), (4, 8), (4, 1)]:
        np.testing.assert_array_equal(quants.pack_bits(quants.unpack_bits(r, bits, group), bits, group), r)
    sc, mn = rng.integers(0, 64, (100, 8), dtype=np.uint8), rng.integers(0, 64, (100, 8), dtype=np.uint8)
    from llmbook.quantize import _pack_scales_k4                        # chapter 21's: the K-quant quantizer packs them
    sc2, mn2 = quants.unpack_scales_k4(_pack_scales_k4(sc, mn))
    np.testing.assert_array_equal(sc, sc2)
    np.testing.assert_array_equal(mn, mn2)


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


# ---------------------------------------------------------------- quantize vs gguf-py

def quant_cases(rng, block):
    "Gaussian rows plus the edge cases the rounding rules are about; (rows, 8 blocks) float32."
    x = rng.standard_normal((12, 8 * block)).astype(np.float32)
    x[0] = 0                                          # all-zero blocks: d = 0, no division by zero
    x[1] = 0.01; x[1, 5] = 7.0                        # a single large value
    x[2] = -np.abs(x[2]); x[2, 3] = -9.0              # the value of largest magnitude is negative
    x[3, :block] = np.linspace(-1, 1, block)          # +max and -max tie: the first one wins
    x[4] = 0.5                                        # constant blocks (max == min)
    x[5] = np.abs(x[5])                               # all positive: the minimum matters
    x[6] = np.round(x[6] * 4) / 4                     # values on exact halves of typical grids
    x[7] *= 1e4; x[8] *= 1e-5                         # huge and tiny (f16 subnormal scales)
    x[9, ::2] = 0                                     # many zeros
    return x


@pytest.mark.parametrize("name", ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_quantize_bytes_match_gguf_py(name):
    rng = np.random.default_rng(100 + sum(map(ord, name)))
    x = quant_cases(rng, 32)
    ours = quantize(x, name)
    ref = gguf.quants.quantize(x, GQ[name])
    assert ours.type == GGMLType[name] and ours.shape == x.shape
    np.testing.assert_array_equal(ours.data, ref.reshape(-1))
    big = rng.standard_normal((64, 4096)).astype(np.float32) * 0.02      # a weight-like matrix
    np.testing.assert_array_equal(quantize(big, name).data, gguf.quants.quantize(big, GQ[name]).reshape(-1))


@pytest.mark.parametrize("name", ["F32", "F16", "BF16"])
def test_quantize_floats_match_gguf_py(name):
    x = quant_cases(np.random.default_rng(7), 32)
    x[10, :4] = [np.inf, -np.inf, np.nan, 1e-40]      # float types keep non-finite values
    ours = quantize(x, name)
    ref = gguf.quants.quantize(x, GQ[name])
    np.testing.assert_array_equal(ours.data, np.ascontiguousarray(ref).view(np.uint8).reshape(-1))


def test_quantize_roundtrip_error_bounds():
    x = np.random.default_rng(1).standard_normal((64, 1024)).astype(np.float32)
    for name, bound in {"Q4_0": 0.10, "Q4_1": 0.09, "Q5_0": 0.05, "Q5_1": 0.045, "Q8_0": 0.0065,
                        "Q2_K": 0.32, "Q3_K": 0.17, "Q4_K": 0.08, "Q5_K": 0.04, "Q6_K": 0.02, "Q8_K": 0.008}.items():
        rmse = np.sqrt(np.mean((dequantize(quantize(x, name)) - x) ** 2))
        assert rmse < bound, (name, rmse)


def test_quantize_errors():
    with pytest.raises(ValueError, match="multiple of the Q4_0 block size 32"):
        quantize(np.ones(40, np.float32), "Q4_0")
    with pytest.raises(ValueError, match="NaN or infinite"):
        quantize(np.r_[np.ones(31), np.inf], "Q8_0")
    with pytest.raises(NotImplementedError, match="IQ4_NL"):
        quantize(np.ones(256), "IQ4_NL")
    with pytest.raises(ValueError, match="unknown GGML type"):
        quantize(np.ones(32), "Q7_0")
    with pytest.raises(ValueError, match="non-empty"):
        quantize(np.ones((0, 32)), "Q8_0")
    with pytest.raises(TypeError):
        quantize(np.array(["a"] * 32), "Q8_0")


def test_chapter_03_quantizes_the_classic_types_only():
    "Chapter 03's `quantize` is chapter 21's for the classic types, byte for byte; the K-quants it refuses, saying where they are."
    x = np.random.default_rng(5).standard_normal((4, 256)).astype(np.float32)
    for name in ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]:
        np.testing.assert_array_equal(quants.quantize(x, name).data, quantize(x, name).data)
    for name in ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"]:
        with pytest.raises(NotImplementedError, match="llmbook.quantize.quantize adds the K-quants"):
            quants.quantize(x, name)


def test_quantize_in_chunks(monkeypatch):
    "Chunking big tensors must not change a byte."
    x = np.random.default_rng(2).standard_normal((8, 2048)).astype(np.float32)
    whole = {n: quantize(x, n).data.copy() for n in ["Q2_K", "Q3_K", "Q4_K", "Q6_K", "Q8_0"]}
    monkeypatch.setattr(quants, "_QUANTIZE_CHUNK_VALUES", 600)     # 2 super-blocks, 18 classic blocks
    for n, data in whole.items():
        np.testing.assert_array_equal(quantize(x, n).data, data)


# ---------------------------------------------------------------- against llama.cpp (ggml) itself

FIXTURE = Path(__file__).parent / "fixtures" / "quants_ggml.json"


@pytest.fixture(scope="module")
def ggml_ref():
    return json.loads(FIXTURE.read_text())


def b64(s, dtype): return np.frombuffer(base64.b64decode(s), dtype)


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"])
def test_dequantize_matches_ggml(ggml_ref, name):
    case = ggml_ref["dequantize"][name]
    raw, values = b64(case["raw"], np.uint8), b64(case["values"], np.float32)
    ours = dequantize(QTensor(raw, GGMLType[name], (values.size,)))
    np.testing.assert_array_equal(ours.view(np.uint32), values.view(np.uint32))


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"])
def test_quantize_bytes_match_ggml(ggml_ref, name):
    "Byte-identical to ggml's quantize_row_*_ref, the K-quants' scale searches included."
    x = b64(ggml_ref["quantize_input"], np.float32)
    ref = b64(ggml_ref["quantize"][name], np.uint8)
    ours = quantize(x, name).data
    size = GGML_TYPES[GGMLType[name]].type_size
    differ = np.flatnonzero((ours.reshape(-1, size) != ref.reshape(-1, size)).any(axis=1))
    assert differ.size == 0, f"{name}: blocks {differ[:10].tolist()} differ from llama.cpp's"


# ---------------------------------------------------------------- GGUFFile.dequantize

def test_gguf_file_dequantize(tmp_path):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 256)).astype(np.float32)
    writer = GGUFWriter(tmp_path / "t.gguf", arch="llama")
    for name in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16"]:
        writer.add_tensor(f"w.{name}", quantize(w, name))
    writer.add_tensor("w.F32", w)
    path = writer.write()
    with GGUFFile(path) as f:
        for name in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16", "F32"]:
            got = f.dequantize(f"w.{name}")
            assert got.dtype == np.float32 and got.shape == (6, 256)
            np.testing.assert_array_equal(got, dequantize(quantize(w, name)))
        with pytest.raises(KeyError, match="no tensor"):
            f.dequantize("missing")
    # fastcore's @patch must leave the module's own dequantize (QTensor -> array) in place
    assert quants.dequantize is dequantize and dequantize.__code__.co_varnames[0] == "qt"


def test_dequantize_strided_bytes():
    "A QTensor over a strided byte view (every other byte of a buffer) still dequantizes correctly."
    rng = np.random.default_rng(9)
    raw = random_blocks("Q4_0", 8, rng).reshape(-1)
    buf = np.zeros(raw.size * 2, np.uint8); buf[::2] = raw
    qt = QTensor(buf[::2], GGMLType.Q4_0, (256,))
    np.testing.assert_array_equal(dequantize(qt), gguf.quants.dequantize(raw, GQ.Q4_0).reshape(-1))
