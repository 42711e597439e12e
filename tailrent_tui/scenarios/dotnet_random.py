"""A port of .NET's seeded `System.Random(seed)`.

.NET keeps its old generator for seeded instances so that a seeded run gives
the same numbers on every release: a modified form of Knuth's subtractive
generator (`Net5CompatSeedImpl` over `CompatPrng` in the runtime). The article's
harness draws its filler topics and tool-output sizes from `new Random(42)`,
so reproducing its numbers needs this generator bit for bit, including C#'s
32-bit integer wrap-around during seeding and the `(int)` truncations.
"""

from __future__ import annotations

INT_MAX = 2**31 - 1  # int.MaxValue, also the generator's modulus (MBIG)
INT_MIN = -(2**31)
_MBIG = INT_MAX
_MSEED = 161803398  # the runtime's magic seed constant, from the golden ratio


def _wrap32(value: int) -> int:
    """C# `int` arithmetic is unchecked: results wrap modulo 2**32."""
    return ((value + 2**31) & 0xFFFFFFFF) - 2**31


def _check_int32(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not INT_MIN <= value <= INT_MAX:
        raise ValueError(f"{name} must fit in a 32-bit signed int, got {value}")


class DotNetRandom:
    """`System.Random(seed)` as .NET 5+ runs it for a seeded instance."""

    __slots__ = ("_inext", "_inextp", "_seed_array")

    def __init__(self, seed: int) -> None:
        _check_int32("seed", seed)
        seed_array = [0] * 56
        # Math.Abs(int.MinValue) would overflow, so the runtime special-cases it.
        subtraction = INT_MAX if seed == INT_MIN else abs(seed)
        mj = _wrap32(_MSEED - subtraction)
        seed_array[55] = mj
        mk = 1
        ii = 0
        for _ in range(1, 55):
            ii += 21
            if ii >= 55:
                ii -= 55
            seed_array[ii] = mk
            mk = _wrap32(mj - mk)
            if mk < 0:
                mk += _MBIG
            mj = seed_array[ii]
        for _ in range(1, 5):
            for i in range(1, 56):
                n = i + 30
                if n >= 55:
                    n -= 55
                # seed_array[55] can start near -2**31, so this subtraction
                # really does overflow in C# for large seeds.
                value = _wrap32(seed_array[i] - seed_array[1 + n])
                if value < 0:
                    value = _wrap32(value + _MBIG)
                seed_array[i] = value
        self._seed_array = seed_array
        self._inext = 0
        self._inextp = 21

    def _internal_sample(self) -> int:
        locinext = self._inext + 1
        if locinext >= 56:
            locinext = 1
        locinextp = self._inextp + 1
        if locinextp >= 56:
            locinextp = 1
        seed_array = self._seed_array
        ret = _wrap32(seed_array[locinext] - seed_array[locinextp])
        if ret == _MBIG:
            ret -= 1
        if ret < 0:
            ret = _wrap32(ret + _MBIG)
        seed_array[locinext] = ret
        self._inext = locinext
        self._inextp = locinextp
        return ret

    def _sample(self) -> float:
        # The runtime multiplies by the reciprocal; dividing would round differently.
        return self._internal_sample() * (1.0 / _MBIG)

    def _sample_for_large_range(self) -> float:
        result = self._internal_sample()
        if self._internal_sample() % 2 == 0:
            result = -result
        d = float(result)
        d += INT_MAX - 1
        d /= 2 * INT_MAX - 1  # `2u * int.MaxValue - 1`: uint arithmetic, no overflow
        return d

    def next(self, *args: int) -> int:
        """`Next()`, `Next(maxValue)` or `Next(minValue, maxValue)`, as in C#."""
        if not args:
            return self._internal_sample()
        if len(args) == 1:
            return self.next_max(args[0])
        if len(args) == 2:
            return self.next_range(args[0], args[1])
        raise TypeError("next() takes 0, 1 or 2 arguments")

    def next_max(self, max_value: int) -> int:
        """`Next(maxValue)`: `(int)(Sample() * maxValue)`, in [0, maxValue)."""
        _check_int32("max_value", max_value)
        if max_value < 0:
            raise ValueError(f"max_value must be non-negative, got {max_value}")
        return int(self._sample() * max_value)

    def next_range(self, min_value: int, max_value: int) -> int:
        """`Next(minValue, maxValue)`, in [minValue, maxValue)."""
        _check_int32("min_value", min_value)
        _check_int32("max_value", max_value)
        if min_value > max_value:
            raise ValueError(f"min_value {min_value} is greater than max_value {max_value}")
        span = max_value - min_value
        if span <= INT_MAX:
            return _wrap32(int(self._sample() * span) + min_value)
        # Only Next(negative, positive) spans more than int.MaxValue; the runtime
        # then draws two samples so that odd results are reachable too.
        return _wrap32(int(self._sample_for_large_range() * span) + min_value)

    def next_double(self) -> float:
        """`NextDouble()`: a sample in [0, 1)."""
        return self._sample()
