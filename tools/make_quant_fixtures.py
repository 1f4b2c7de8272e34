"""Make tests/fixtures/quants_ggml.json: llama.cpp's own (de)quantizers run on seeded random data.

ggml's reference C functions (`dequantize_row_*`, `quantize_row_*_ref`) are called through ctypes from the
`libggml-base.so` that llama-cpp-python ships; nothing is imported from llama_cpp itself.

    $REFPY tools/make_quant_fixtures.py        # REFPY: a python with llama-cpp-python and numpy
"""
import base64, ctypes, importlib.util, json, sys
from pathlib import Path
import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "quants_ggml.json"
QK, QK_K = 32, 256
# name -> (values per block, bytes per block, byte offsets of f16 scale fields, offset of an f32 scale)
TYPES = {"q4_0": (QK, 18, [0]), "q4_1": (QK, 20, [0, 2]), "q5_0": (QK, 22, [0]), "q5_1": (QK, 24, [0, 2]),
         "q8_0": (QK, 34, [0]), "q2_K": (QK_K, 84, [80, 82]), "q3_K": (QK_K, 110, [108]),
         "q4_K": (QK_K, 144, [0, 2]), "q5_K": (QK_K, 176, [0, 2]), "q6_K": (QK_K, 210, [208]),
         "q8_K": (QK_K, 292, [])}
QUANTIZED_BY_REF = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K"]


def b64(a: np.ndarray) -> str: return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()


def load_ggml():
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None: sys.exit("llama_cpp is not installed in this python: run with REFPY=/path/to/python-with-llama-cpp")
    lib = ctypes.CDLL(str(Path(spec.submodule_search_locations[0]) / "lib" / "libggml-base.so"))
    for name in TYPES:
        fn = getattr(lib, f"dequantize_row_{name}")
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
    for name in QUANTIZED_BY_REF:
        fn = getattr(lib, f"quantize_row_{name}_ref")
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
    return lib


def random_blocks(name, n, rng):
    bs, size, f16_at = TYPES[name]
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    for off in f16_at:
        raw[:, off:off + 2] = rng.uniform(-2, 2, n).astype(np.float16).view(np.uint8).reshape(n, 2)
    if name == "q8_K":
        raw[:, 0:4] = rng.uniform(-2, 2, n).astype(np.float32).view(np.uint8).reshape(n, 4)
    return raw


def quant_inputs(rng):
    "Gaussian rows plus edge cases, 8192 values (a multiple of every block size)."
    x = rng.standard_normal((32, 256)).astype(np.float32) * np.float32(0.05)
    x[0] = 0                                  # all-zero super-block
    x[1, :] = 0.001; x[1, 7] = 3.0            # one large value in a block of small ones
    x[2] = -np.abs(x[2]); x[2, 40] = -1.0     # the value of largest magnitude is negative
    x[3] = 0.25                               # a constant block
    x[4] = np.abs(x[4])                       # all positive
    x[5, :32] = np.linspace(-1, 1, 32)        # ties between +max and -max
    x[6] *= 1000; x[7] *= 1e-6                # large and tiny magnitudes
    return x.reshape(-1)


def main():
    lib = load_ggml()
    rng = np.random.default_rng(20261121)
    out = {"about": "llama.cpp (ggml) reference (de)quantizers on seeded random data; made by tools/make_quant_fixtures.py",
           "dequantize": {}, "quantize": {}}
    for name, (bs, size, _) in TYPES.items():
        n = 2048 // bs if bs == QK else 4              # 2048 classic values, 1024 K-quant values
        raw = random_blocks(name, n, rng)
        y = np.zeros(n * bs, np.float32)
        getattr(lib, f"dequantize_row_{name}")(raw.ctypes.data, y.ctypes.data, y.size)
        out["dequantize"][name.upper()] = {"raw": b64(raw), "values": b64(y)}
    x = quant_inputs(rng)
    out["quantize_input"] = b64(x)
    for name in QUANTIZED_BY_REF:
        bs, size, _ = TYPES[name]
        q = np.zeros(x.size // bs * size, np.uint8)
        getattr(lib, f"quantize_row_{name}_ref")(x.ctypes.data, q.ctypes.data, x.size)
        out["quantize"][name.upper()] = b64(q)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
