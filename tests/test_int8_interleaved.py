"""Chapter 13's Q4_K, Q6_K, Q4_0, Q5_0, Q8_0 and MXFP4 groups of 8 interleaved rows: the same products as the blocks read in place (whose integer sums
they add in another order), chosen by `block_matrix` only where they apply, and what a model runs on."""
import os, subprocess, sys
import numpy as np
import pytest
from llmbook.tensors import GGMLType
from llmbook.packed import random_qtensor
from llmbook.quants import dequantize
from llmbook.int8 import (BlockMatrix, InterleavedMatrix, block_matrix, kernel_set, _repack_q4_k_x8, _X8_BYTES,
                          _repack_q6_k_x8, _X6_BYTES, _repack_q4_0_x8, _repack_q5_0_x8, _repack_q8_0_x8, _repack_mxfp4_x8,
                          _X40_BYTES, _X41_BYTES, _X50_BYTES, _X80_BYTES, _XMX_BYTES, _XS_BYTES, _repack_q4_1_x8)

pytestmark = pytest.mark.skipif(kernel_set() != "avx2", reason="this CPU has no AVX2: the integer kernels cannot run here")

@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K", "Q4_0", "Q4_1", "Q5_0", "Q8_0", "MXFP4", "IQ4_NL", "IQ4_XS"])
@pytest.mark.parametrize("rows,cols,n_tok", [(8, 256, 1), (24, 512, 3), (96, 1024, 9), (64, 2048, 64), (16, 640, 5)])
def test_interleaved_equals_in_place(kind, rows, cols, n_tok):
    block, group = {"Q4_K": (256, _X8_BYTES), "Q6_K": (256, _X6_BYTES), "Q4_0": (32, _X40_BYTES), "Q4_1": (32, _X41_BYTES), "Q5_0": (32, _X50_BYTES),
                    "Q8_0": (32, _X80_BYTES), "MXFP4": (32, _XMX_BYTES), "IQ4_NL": (32, _X40_BYTES), "IQ4_XS": (256, _XS_BYTES)}[kind]
    if cols % block: pytest.skip(f"{kind} rows are whole blocks of {block}")
    qt = random_qtensor(kind, (rows, cols), rows + cols)
    inter, inplace = block_matrix(qt), BlockMatrix(qt)
    assert isinstance(inter, InterleavedMatrix) and inter.packed.size == rows // 8 * cols // block * group
    X = np.random.default_rng(n_tok).standard_normal((n_tok, cols)).astype(np.float32) * 3
    ref = inplace.matmul(X)
    tol = 1e-5 * np.abs(ref).max()     # the same integer sums per block, their float sum in another order: float32 rounding
    np.testing.assert_allclose(inter.matvec(X[0]), inplace.matvec(X[0]), rtol=1e-5, atol=tol)
    np.testing.assert_allclose(inter.matmul(X), ref, rtol=1e-5, atol=tol)
    W = dequantize(qt).reshape(rows, cols)
    assert np.abs(inter.matmul(X) - X @ W.T).max() < 0.02 * np.abs(X @ W.T).max()      # int8 activations' rounding
    out = np.zeros((n_tok, rows + 16), np.float32)
    inter.matmul(X, out, col0=8)                                                      # into the middle of a wider output
    assert not out[:, :8].any() and not out[:, 8 + rows:].any() and np.allclose(out[:, 8:8 + rows], ref, atol=tol)

@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K", "Q4_0", "Q4_1", "Q5_0", "Q8_0", "MXFP4", "IQ4_NL", "IQ4_XS"])
def test_every_token_of_a_batch_as_alone(kind):
    """Batches of 1 to 7 tokens (groups of four, then a tail of one or two run one token at a time, or of three padded
    to four): every token's row the same bits as the token alone (chapter 16's one answer)."""
    qt = random_qtensor(kind, (24, 512), 9)
    m = block_matrix(qt)
    X = np.random.default_rng(2).standard_normal((7, 512)).astype(np.float32)
    alone = np.stack([m.matvec(x) for x in X])
    for n in range(1, 8):
        np.testing.assert_array_equal(m.matmul(X[:n]), alone[:n], err_msg=f"{n} tokens")

def test_repack_layout_of_one_group():
    "Byte by byte against the layout chapter 13's table gives, from chapter 03's unpacking of the same blocks."
    qt = random_qtensor("Q4_K", (8, 256), 5)
    raw = np.asarray(qt.data).reshape(8, 144)
    p = np.empty(_X8_BYTES, np.uint8); _repack_q4_k_x8(np.asarray(qt.data), np.arange(8, dtype=np.int64) * 144, 256, p)
    assert p[1152:1168].tobytes() == raw[:, 0:2].tobytes() and p[1168:1184].tobytes() == raw[:, 2:4].tobytes()
    lev = np.empty((8, 256), np.uint8)
    for k in range(4):
        lev[:, 64 * k:64 * k + 32], lev[:, 64 * k + 32:64 * k + 64] = raw[:, 16 + 32 * k:48 + 32 * k] & 15, raw[:, 16 + 32 * k:48 + 32 * k] >> 4
    for j in range(8):
        for h in range(4):
            v = p[128 * j + 32 * h:128 * j + 32 * h + 32].reshape(8, 4)
            np.testing.assert_array_equal(v & 15, lev[:, 32 * j + 4 * h:32 * j + 4 * h + 4])
            np.testing.assert_array_equal(v >> 4, lev[:, 32 * j + 4 * h + 16:32 * j + 4 * h + 20])

def test_q6_k_repack_layout_of_one_group():
    "Byte by byte against the layout of chapter 13's Q6_K table, from chapter 03's dequantizer's levels."
    qt = random_qtensor("Q6_K", (8, 256), 6)
    raw = np.asarray(qt.data).reshape(8, 210)
    p = np.empty(_X6_BYTES, np.uint8); _repack_q6_k_x8(np.asarray(qt.data), np.arange(8, dtype=np.int64) * 210, 256, p)
    np.testing.assert_array_equal(p[1664:1696].view(np.float32), raw[:, 208:210].copy().view(np.float16).ravel().astype(np.float32))
    sc = raw[:, 192:208].view(np.int8)
    W = dequantize(qt).reshape(8, 256)
    d = raw[:, 208:210].copy().view(np.float16).astype(np.float32)
    lev = np.rint(W / (d * np.repeat(sc, 16, axis=1).astype(np.float32)) + 32).astype(np.uint8)  # the levels 0..63 back
    for j in range(8):
        P = 416 * (j // 2)
        np.testing.assert_array_equal(p[P + 384 + 16 * (j % 2):P + 400 + 16 * (j % 2)].view(np.int8).reshape(8, 2), sc[:, 2 * j:2 * j + 2])
        for h in range(4):
            v = p[P + 128 * (j % 2) + 32 * h:P + 128 * (j % 2) + 32 * h + 32].reshape(8, 4)
            hb = p[P + 256 + 64 * (j % 2) + 32 * (h // 2):][:32].reshape(8, 4) >> (4 * (h % 2))
            np.testing.assert_array_equal((v & 15) | ((hb & 3) << 4), lev[:, 32 * j + 4 * h:32 * j + 4 * h + 4])
            np.testing.assert_array_equal((v >> 4) | (((hb >> 2) & 3) << 4), lev[:, 32 * j + 16 + 4 * h:32 * j + 20 + 4 * h])

@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q5_0", "Q8_0", "MXFP4"])
def test_x0_repack_layout_of_one_group(kind):
    """Byte by byte against chapter 13's table: the file's level bytes, 4 per row per vector (nibbles: 4 vectors, Q8_0's
    bytes: 8); the 8 scales last, the file's own bytes (f16; MXFP4's E8M0 byte); Q4_1's m at 128; Q5_0's fifth bits regrouped."""
    size, at, words, repack, group = {"Q4_0": (18, 2, 4, _repack_q4_0_x8, _X40_BYTES), "Q4_1": (20, 4, 4, _repack_q4_1_x8, _X41_BYTES),
                                      "Q5_0": (22, 6, 4, _repack_q5_0_x8, _X50_BYTES), "Q8_0": (34, 2, 8, _repack_q8_0_x8, _X80_BYTES),
                                      "MXFP4": (17, 1, 4, _repack_mxfp4_x8, _XMX_BYTES)}[kind]
    qt = random_qtensor(kind, (8, 64), 11)
    raw = np.asarray(qt.data).reshape(8, 2, size)
    p, again = np.zeros(2 * group, np.uint8), np.full(2 * group, 255, np.uint8)
    for out in (p, again): repack(np.asarray(qt.data), np.arange(8, dtype=np.int64) * 2 * size, 64, out)
    np.testing.assert_array_equal(p, again)                  # every byte of `out` written, whatever it held
    f16 = lambda o: raw[:, b, o:o + 2].copy().view(np.float16)[:, 0]
    for b in range(2):
        g = p[group * b:group * (b + 1)]
        assert g[:32 * words].reshape(words, 8, 4).transpose(1, 0, 2).tobytes() == raw[:, b, at:at + 4 * words].tobytes()
        if kind == "MXFP4": np.testing.assert_array_equal(g[group - 8:], raw[:, b, 0])
        else: np.testing.assert_array_equal(g[group - 16:].view(np.float16), f16(0))
        if kind == "Q4_1": np.testing.assert_array_equal(g[128:144].view(np.float16), f16(2))
        if kind == "Q5_0":
            qh = raw[:, b, 2:6].copy().view(np.uint32)[:, 0].astype(np.int64)
            fifth = g[128:160].view(np.uint32).astype(np.int64)            # word 2h + half
            for v in range(8):
                h, half = v // 2, v % 2
                assert fifth[v] == sum(((qh[r] >> (16 * half + 4 * h)) & 15) << (4 * r) for r in range(8)), (b, v)

@pytest.mark.parametrize("interleaved", [False, True])
def test_mxfp4_scales_at_the_extremes(interleaved):
    """Both MXFP4 kernels build 2^(e-128) from the scale's bits (in place: one block's; interleaved: 8 rows' at once):
    e = 0 and 1 (subnormals), 2, 3, 126, 127, 200 and 230 against chapter 03's dequantizer."""
    qt = random_qtensor("MXFP4", (8, 64), 3)
    raw = np.asarray(qt.data).reshape(8, 2, 17).copy()
    raw[:, 0, 0], raw[:, 1, 0] = [0, 1, 2, 127, 200, 230, 3, 126], 127     # one extreme block per row, its partner ordinary
    from llmbook.tensors import QTensor
    q = QTensor(raw.reshape(-1), GGMLType.MXFP4, (8, 64))
    W = dequantize(q).reshape(8, 64).astype(np.float64)
    x = np.zeros(64, np.float32); x[:32] = np.random.default_rng(1).standard_normal(32)   # only the extreme blocks count
    m = block_matrix(q) if interleaved else BlockMatrix(q)
    assert isinstance(m, InterleavedMatrix) == interleaved
    got, ref = m.matvec(x), W @ x.astype(np.float64)
    scale = np.abs(W[:, :32]).sum(-1) * np.abs(x).max()          # the largest the dot could be: 8-bit x is 1/127 of it
    assert (np.abs(got - ref) <= scale / 100).all(), (got, ref)

def test_block_matrix_chooses():
    q4k, q6k = random_qtensor("Q4_K", (12, 256), 1), random_qtensor("Q6_K", (16, 256), 2)
    assert type(block_matrix(q4k)) is BlockMatrix                           # 12 rows: not whole groups of 8
    assert type(block_matrix(q4k, random_qtensor("Q4_K", (4, 256), 3))) is InterleavedMatrix   # 16 rows stacked
    assert type(block_matrix(q6k)) is InterleavedMatrix
    assert type(block_matrix(random_qtensor("Q5_K", (16, 256), 5))) is BlockMatrix    # no interleaved kernel
    assert type(block_matrix(random_qtensor("Q5_0", (16, 640), 6))) is InterleavedMatrix
    assert type(block_matrix(random_qtensor("Q8_0", (16, 640), 7))) is InterleavedMatrix
    assert type(block_matrix(random_qtensor("Q5_1", (16, 640), 7))) is BlockMatrix   # no interleaved kernel
    assert type(block_matrix(random_qtensor("Q4_1", (16, 576), 7))) is InterleavedMatrix
    assert type(block_matrix(random_qtensor("Q4_1", (12, 576), 7))) is BlockMatrix     # not whole groups of 8
    m = block_matrix(random_qtensor("Q4_K", (16, 256), 4))
    np.testing.assert_array_equal(m.rows([3, 0]), BlockMatrix(random_qtensor("Q4_K", (16, 256), 4)).rows([3, 0]))  # rows: the file's blocks

def test_repack_can_be_turned_off():
    code = ("from llmbook.packed import random_qtensor; from llmbook.int8 import block_matrix; "
            "print(type(block_matrix(random_qtensor('Q4_K', (16, 256), 1))).__name__)")
    env = dict(os.environ, LLMBOOK_REPACK="0")
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip() == "BlockMatrix"

@pytest.mark.parametrize("rows", [1, 2, 3, 5, 130])
def test_q4_1_row_pairs(rows):
    """Q4_1's matrix x vector kernel takes two rows a task (the last one repeated for an odd count): each row's blocks in
    order into one accumulator, as the batch kernel adds them, so one token alone and in a batch are the same bits."""
    qt = random_qtensor("Q4_1", (rows, 576), rows)
    m = BlockMatrix(qt)
    X = np.random.default_rng(rows).standard_normal((3, 576)).astype(np.float32)
    alone, batch = np.stack([m.matvec(x) for x in X]), m.matmul(X)
    np.testing.assert_array_equal(alone, batch)
    W = dequantize(qt).reshape(rows, 576)
    assert np.abs(alone - X @ W.T).max() < 0.02 * np.abs(X @ W.T).max()


def test_one_matrix_interface_with_the_same_checks():
    "Packed, block and interleaved matrices are all chapter 12's `Matrix`: the same methods refuse the same bad shapes."
    from llmbook.packed import Matrix, pack
    qt = random_qtensor("Q4_K", (16, 256), 5)
    for m in (pack(qt), BlockMatrix(qt), InterleavedMatrix(qt)):
        assert isinstance(m, Matrix) and m.shape == (16, 256)
        with pytest.raises(ValueError, match="x must be"): m.matvec(np.zeros(255, np.float32))
        with pytest.raises(ValueError, match="out must"): m.matvec(np.zeros(256, np.float32), np.zeros(15, np.float32))
        with pytest.raises(ValueError, match="X must"): m.matmul(np.zeros((3, 255), np.float32))
        with pytest.raises(IndexError): m.rows([16])
        np.testing.assert_allclose(m.rows([3, 0]), pack(qt).rows([3, 0]), rtol=0, atol=0)

def test_a_large_matrix_is_repacked_in_slabs_from_the_file(tmp_path):
    "Over _SLAB_ROWS rows of a file map: repacked a slab at a time, each slab's file pages handed back; the same bytes as one repack."
    from llmbook.gguf import GGUFFile, GGUFWriter
    from llmbook.int8 import _SLAB_ROWS, _file_map
    qt = random_qtensor("Q8_0", (_SLAB_ROWS + 64, 64), 21)
    w = GGUFWriter(tmp_path / "m.gguf"); w.add_tensor("m", qt); w.write()
    with GGUFFile(tmp_path / "m.gguf") as f:
        q = f.qtensor("m")
        assert _file_map(q.data) is not None and _file_map(np.array(q.data)) is None
        slabs, whole = InterleavedMatrix(q), InterleavedMatrix(qt)
        one = np.empty_like(slabs.packed); _repack_q8_0_x8(whole.w, whole.rows_at, 64, one)   # one call, all rows
        np.testing.assert_array_equal(slabs.packed, one); np.testing.assert_array_equal(whole.packed, one)
        x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
        np.testing.assert_array_equal(slabs.matvec(x), whole.matvec(x))
