"""rng.py: lib/cdp_rng.c in Python, bit for bit.

xoshiro256** 1.0 seeded by SplitMix64, Lemire's unbiased below(n), the
Fisher-Yates shuffle (last element first) and cdp_rng_derive(seed, a, b).
cdp-train's epoch order is epoch_order(n, seed, epoch): the shuffle of
0..n-1 by the generator seeded with derive(seed, epoch, 0) (see
tools/train/loader.h). Pure Python: a shuffle costs a few microseconds per
key (seconds per epoch for a million keys).
"""
import operator

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def check_seed(seed):
    """seed as an int in [0, 2**64-1], the run seeds cdp-train --seed and
    cdp-keyshuffle --seed accept; ValueError naming that range otherwise
    (taken modulo 2**64, 2**64 would silently be seed 0 and -1 seed
    2**64-1)."""
    try:
        # a bool is an int to Python, but seed=True is a slip, not seed 1
        if isinstance(seed, bool):
            raise TypeError
        s = operator.index(seed)
    except TypeError:
        raise ValueError("seed %r is not an integer in [0, 2**64-1]" % (seed,)) from None
    if not 0 <= s <= M64:
        raise ValueError("seed %d is outside [0, 2**64-1] (cdp-train --seed)" % s)
    return s


def _mix(z):
    """SplitMix64's step from state z: (new state, output)."""
    z = (z + GOLDEN) & M64
    x = z
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return z, x ^ (x >> 31)


def derive(seed, a, b):
    """cdp_rng_derive: a seed for stream (a, b) of seed (any integers:
    Python's, NumPy's; each taken modulo 2**64 as the C uint64_t)."""
    h = _mix(operator.index(seed) & M64)[1]
    h = _mix(h ^ (operator.index(a) & M64))[1]
    return _mix(h ^ (operator.index(b) & M64))[1]


class Rng:
    """cdp_rng: xoshiro256** with its state filled by SplitMix64(seed)."""

    __slots__ = ("s",)

    def __init__(self, seed=0, state=None):
        if state is not None:
            self.s = [int(v) & M64 for v in state]
            return
        x, s = operator.index(seed) & M64, []
        for _ in range(4):
            x, out = _mix(x)
            s.append(out)
        self.s = s

    def next(self):
        s = self.s
        r = ((((s[1] * 5) & M64) << 7 | ((s[1] * 5) & M64) >> 57) & M64) * 9 & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = ((s[3] << 45) | (s[3] >> 19)) & M64
        return r

    def below(self, n):
        """Uniform in [0, n) (Lemire's nearly divisionless method)."""
        if n == 0:
            return 0
        m = self.next() * n
        if (m & M64) < n:
            threshold = ((1 << 64) - n) % n
            while (m & M64) < threshold:
                m = self.next() * n
        return m >> 64

    def double(self):
        return (self.next() >> 11) * 2.0 ** -53

    def shuffle(self, a):
        """In place, as cdp_rng_shuffle_size: for i = n-1 down to 1, swap
        a[i] with a[below(i + 1)]."""
        for i in range(len(a), 1, -1):
            j = self.below(i)
            a[i - 1], a[j] = a[j], a[i - 1]
        return a


def epoch_order(n, seed, epoch):
    """cdp-train's permutation of key indices 0..n-1 in epoch `epoch`."""
    return Rng(derive(seed, epoch, 0)).shuffle(list(range(operator.index(n))))
