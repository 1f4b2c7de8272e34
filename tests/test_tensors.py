"""Chapter 01 (llmbook.tensors): strides and views, bf16, the GGML type table and QTensor's views and checks."""
import numpy as np
import pytest

from llmbook.tensors import GGML_TYPES, GGMLType, QTensor, bf16_to_f32, f32_to_bf16, row_nbytes, type_info


def test_strides_and_views():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t, s = a.T, a[:, ::2]
    assert t.strides == a.strides[::-1] and s.strides == (12, 8)
    assert np.shares_memory(a, t) and np.shares_memory(a, s)
    # the chapter's figure: a holds 0..5, so a view's values in C order are the slots it visits, in order
    assert a.T.ravel().tolist() == [0, 3, 1, 4, 2, 5] and a[:, ::2].ravel().tolist() == [0, 2, 3, 5]


def test_bf16_round_trip():
    assert np.array_equal(bf16_to_f32(f32_to_bf16(np.array([1.0, -2.5, 0.0], np.float32))), [1.0, -2.5, 0.0])
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(1e30).astype(np.float32))
    assert np.isfinite(bf16_to_f32(f32_to_bf16(np.float32(1e30))))
    # bf16 keeps 8 significant bits: the relative error of rounding is at most 2**-8
    r = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    assert np.all(np.abs(bf16_to_f32(f32_to_bf16(r)) - r) <= np.abs(r) * 2**-8)
    assert np.isnan(bf16_to_f32(f32_to_bf16(np.float32(np.nan))))


def test_type_sizes_are_ggml_s():
    "The block geometry chapter 01's table gives, against the sizes llama.cpp's ggml.c uses."
    expected = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20),
                "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34), "Q2_K": (256, 84), "Q3_K": (256, 110),
                "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210), "Q8_K": (256, 292)}
    for name, (bs, ts) in expected.items():
        info = GGML_TYPES[GGMLType[name]]
        assert (info.block_size, info.type_size) == (bs, ts), name
    assert type_info("Q4_0") is type_info(2) is GGML_TYPES[GGMLType.Q4_0]
    with pytest.raises(ValueError, match="unknown"): type_info("Q9_9")
    with pytest.raises(ValueError, match="whole number"): row_nbytes(GGMLType.Q4_0, 33)


def test_qtensor_views_and_checks():
    buf = np.arange(4 * 2 * 18, dtype=np.uint8)
    q = QTensor(buf, GGMLType.Q4_0, (4, 64))
    assert q.rows().shape == (4, 36) and q.blocks().shape == (8, 18)
    assert np.shares_memory(q[1:3].data, buf) and q[1:3].shape == (2, 64) and q[2].shape == (64,)
    with pytest.raises(ValueError, match="needs 144 bytes"): QTensor(buf[:-1], GGMLType.Q4_0, (4, 64))
    with pytest.raises(ValueError, match="whole number"): QTensor(buf, GGMLType.Q4_0, (8, 36))
    f = QTensor.from_array(np.ones((3, 5), np.float16))
    assert f.type == GGMLType.F16 and f.nbytes == 30 and f.rows().shape == (3, 10)
    with pytest.raises(TypeError): QTensor.from_array(np.ones(4, np.int32))
