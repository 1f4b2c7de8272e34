"""Chapter 13's VNNI choice: where the CPU has VNNI, `_dot_u8s8` emits one `vpdpbusd` in place of `vpmaddubsw` +
`vpmaddwd`. The integer sums are the same, so the products must be bit-identical to the AVX2 code's, which a second
process makes on the same CPU with VNNI switched off (`NUMBA_CPU_FEATURES`). Skipped where the CPU has no VNNI."""
import json, os, subprocess, sys
import pytest
from llmbook.int8 import has_vnni, has_vnni512, host_features, kernel_set

pytestmark = pytest.mark.skipif(kernel_set() != "avx2" or not has_vnni(),
                                reason="this CPU has no VNNI (AVX512-VNNI with AVX512-VL, or AVX-VNNI): nothing to compare")

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q6_K", "MXFP4", "IQ4_NL"]   # blocks read in place go through
    # _dot_u8s8, and groups of 8 rows (block_matrix) through vpdpbusd as well: with AVX512-VNNI, two groups' 16 rows at once

PRODUCTS = """
import json, sys, numpy as np
from llmbook.int8 import BlockMatrix, block_matrix, has_vnni
from llmbook.packed import random_qtensor
X = np.random.default_rng(0).standard_normal((9, 512)).astype(np.float32) * 3
out = {"vnni": has_vnni()}
for t in json.loads(sys.argv[1]):
    qt = random_qtensor(t, (40, 512), seed=7)         # 5 groups of 8 rows: two pairs of groups and one alone
    out[t] = [m.matvec(X[0]).tobytes().hex() + m.matmul(X).tobytes().hex() for m in (BlockMatrix(qt), block_matrix(qt))]
print(json.dumps(out))
"""

def _without_vnni() -> dict:
    "This CPU's features with VNNI switched off, as chapter 13 runs its comparison."
    flat = ",".join(["+" + f for f in sorted(host_features() - {"avx512vnni", "avxvnni"})] + ["-avx512vnni", "-avxvnni"])
    return dict(os.environ, NUMBA_CPU_FEATURES=flat)

def _products(env=None) -> dict:
    r = subprocess.run([sys.executable, "-c", PRODUCTS, json.dumps(TYPES)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)

def test_vnni_products_are_bit_identical_to_avx2():
    with_vnni, without = _products(), _products(_without_vnni())
    assert with_vnni.pop("vnni") is True and without.pop("vnni") is False
    for t in TYPES:
        assert with_vnni[t][0] == without[t][0], f"{t}: blocks read in place differ with VNNI"
        assert with_vnni[t][1] == without[t][1], f"{t}: the matrix of block_matrix differs with VNNI"

ASM = """
import numpy as np
from numba import njit
from llmbook.int8 import block_dot, vzero, vsum, _Q8_0
@njit                                      # not cached: its assembly is made here, for this process's target
def one_block(w, xq, xb, dx):
    return vsum(block_dot(_Q8_0, vzero(), w, 0, xq, 0, xb, 0, dx, np.float32(0)))
w, xq, xb = np.zeros(34, np.uint8), np.zeros(32, np.int8), np.zeros(2, np.int16)
one_block(w, xq, xb, np.float32(1))
asm = next(iter(one_block.inspect_asm().values()))
print(asm.count("vpdpbusd"), asm.count("vpmaddubsw"))
"""

def test_the_instruction_follows_the_target():
    "The same source emits vpdpbusd for this CPU, and vpmaddubsw when the target has no VNNI."
    run = lambda env=None: subprocess.run([sys.executable, "-c", ASM], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert run() == ["1", "0"] and run(_without_vnni()) == ["0", "1"]

WIDE_ASM = """
import numpy as np
from llmbook.int8 import block_matrix
from llmbook.packed import random_qtensor
m = block_matrix(random_qtensor("Q4_1", (32, 256), seed=1))
m.matmul(np.ones((4, 256), np.float32))
asm = next(iter(m._gemm.inspect_asm().values()))       # a fresh NUMBA_CACHE_DIR: compiled here, so the assembly is kept
lines = [l for l in asm.splitlines() if "vpdpbusd" in l]
print(sum("zmm" in l for l in lines), sum("ymm" in l for l in lines))
"""

@pytest.mark.skipif(not has_vnni512(), reason="this CPU has no AVX512-VNNI: groups of 8 rows only")
def test_two_groups_in_512_bit_vectors(tmp_path):
    "With AVX512-VNNI, the batch kernel of the blocks of 32 runs two groups' 16 rows in zmm registers (the odd group in ymm)."
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    zmm, ymm = map(int, subprocess.run([sys.executable, "-c", WIDE_ASM], env=env, capture_output=True, text=True, check=True).stdout.split())
    assert zmm > 0 and ymm > 0
