"""Made-up logits for the sampler parity cases, shared by tests/test_sampling.py and tools/make_sampling_fixtures.py
(which runs under llama-cpp-python's Python and imports this file by path). A small integer hash, not an RNG, so
the fixture JSON stores only a seed and the sha256 of the numbers."""
import numpy as np

def hash_uniform(n, salt):
    "n uniforms in (0, 1) from a splitmix64-style hash of (index, salt): plain integer arithmetic, no RNG."
    x = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(salt)
    x ^= x >> np.uint64(30); x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27); x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return ((x >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53

def case_logits(n_vocab, salt, scale):
    "Deterministic float32 logits: `scale` times standard normals (Box-Muller over two hashed uniforms)."
    u1, u2 = hash_uniform(n_vocab, salt), hash_uniform(n_vocab, salt + 1_000_003)
    return (scale * np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)).astype(np.float32)
