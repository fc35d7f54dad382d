"""The fixed-point format: I integer bits, f fraction bits, its overflow mode and its storage.

:class:`FixedFormat` encodes and decodes values, checks the error array a
kernel wrote, and offers each elementary operation on raws (for tests and
notebooks), in one word (constructions/machine/fixedpoint.py, I + f <= 62) or
two limbs (constructions/machine/wide.py, I + f <= 126). Semantics:
docs/theory.md §1.

Example::

    >>> fmt = FixedFormat(int_bits=4, frac_bits=3)
    >>> a, b = fmt.encode(Fraction(3, 2)), fmt.encode(Fraction(5, 8))
    >>> fmt.decode(fmt.mul(a, b))        # 15/16 rounded to 1/8: half to even
    Fraction(1, 1)
    >>> fmt.add(fmt.encode(15), fmt.encode(1))   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    rnngap.constructions.machine.fixedpoint.FixedPointOverflow: add overflows Q4.3 ...: the result needs at least 5 integer bits, ...
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import wide as W
from . import wide_attention as WA
from .fixedpoint import (
    MAX_MAGNITUDE_BITS, MAX_WIDE_MAGNITUDE_BITS, MODES, STORAGES, FixedPointOverflow, Number, check_err, fx_add,
    fx_attend, fx_div, fx_exp, fx_mul, fx_sub, max_abs_raw, new_err,
)


@dataclass(frozen=True)
class FixedFormat:
    """``int_bits`` (I) integer bits, ``frac_bits`` (f) fraction bits, a sign bit.

    ``mode`` is ``"raise"`` (overflow is an error) or ``"saturate"`` (clamp,
    counted in ``err[E_SAT]``).

    ``storage`` is ``"int64"`` (one word per value, I + f <= 62: the int64
    executor, constructions/machine/kernels.py) or ``"two-limb"`` (two words, I + f <= 126:
    the two-limb executor, constructions/machine/wide_exec.py). A format past int64 must
    say ``"two-limb"``; the constructions choose it where their declared format
    needs it (:func:`storage_for`). Values and rounding are the same in both.
    """

    int_bits: int
    frac_bits: int
    mode: str = "raise"
    storage: str = "int64"

    def __post_init__(self) -> None:
        I, f = self.int_bits, self.frac_bits
        if not (isinstance(I, (int, np.integer)) and isinstance(f, (int, np.integer))):
            raise TypeError(f"int_bits and frac_bits must be ints, got {I!r}, {f!r}")
        if I < 0 or f < 0:
            raise ValueError(f"int_bits and frac_bits must be >= 0, got I={I}, f={f}")
        if self.storage not in STORAGES:
            raise ValueError(f"storage must be one of {list(STORAGES)}, got {self.storage!r}")
        if I + f > STORAGES[self.storage]:
            if self.storage == "int64":
                raise ValueError(
                    f"I + f = {I + f} exceeds {MAX_MAGNITUDE_BITS}: int64 storage holds at most "
                    f"{MAX_MAGNITUDE_BITS} magnitude bits (p = I + f + 1 <= 63); storage='two-limb' "
                    f"holds {MAX_WIDE_MAGNITUDE_BITS}")
            raise ValueError(f"I + f = {I + f} exceeds {MAX_WIDE_MAGNITUDE_BITS}, what two-limb storage holds")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}, got {self.mode!r}")

    # -- descriptors
    @property
    def name(self) -> str:
        return (f"Q{self.int_bits}.{self.frac_bits}" + ("(sat)" if self.mode == "saturate" else "")
                + ("[2x64]" if self.wide else ""))

    @property
    def wide(self) -> bool:
        """Stored in two limbs (runs on the two-limb executor)."""
        return self.storage == "two-limb"

    @property
    def total_bits(self) -> int:
        """p = I + f + 1."""
        return self.int_bits + self.frac_bits + 1

    @property
    def mode_code(self) -> int:
        return MODES[self.mode]

    @property
    def max_raw(self) -> int:
        return (1 << (self.int_bits + self.frac_bits)) - 1

    @property
    def args(self) -> tuple[int, int, int]:
        """(I, f, mode) as passed to kernels."""
        return int(self.int_bits), int(self.frac_bits), self.mode_code

    def with_bits(self, int_bits: int | None = None, frac_bits: int | None = None,
                  mode: str | None = None, storage: str | None = None) -> "FixedFormat":
        """This format with some fields changed (the storage is kept unless given)."""
        return FixedFormat(self.int_bits if int_bits is None else int_bits,
                           self.frac_bits if frac_bits is None else frac_bits,
                           self.mode if mode is None else mode,
                           self.storage if storage is None else storage)

    # -- conversion
    def encode(self, x: Number, exact: bool = True, what: str = "value") -> int:
        """The raw integer of ``x``. ``exact=True`` (default) refuses values that are
        not on the grid; ``exact=False`` rounds half to even. Out of range raises."""
        if isinstance(x, np.generic):   # numpy scalars: their Python value (Fraction keeps np.int64 otherwise)
            x = x.item()
        q = Fraction(x)  # floats convert exactly
        scaled = q * (1 << self.frac_bits)
        if scaled.denominator != 1:
            if exact:
                raise ValueError(
                    f"{what} = {x} is not a multiple of 2^-{self.frac_bits}; "
                    f"pass exact=False to round it"
                )
            r = round(scaled)  # Fraction.__round__ is half to even
        else:
            r = scaled.numerator
        if abs(r) > self.max_raw:
            if self.mode == "saturate":
                return self.max_raw if r > 0 else -self.max_raw
            need = max(0, abs(r).bit_length() - self.frac_bits)
            raise FixedPointOverflow("encode", need, self, what)
        return int(r)

    def encode_array(self, xs, exact: bool = True, what: str = "array") -> np.ndarray:
        """:meth:`encode` of every entry (the same numbers and the same errors, which
        name the entry's index). Entries equal to 0 give raw 0 without a visit;
        ints and Fractions whose denominator is a power of two <= 2^f with the raw
        in range are converted directly (the common case of the builders' weight
        matrices); every other entry goes through :meth:`encode` itself."""
        arr = np.asarray(xs, dtype=object)
        if self.wide:
            return self._encode_wide(arr, exact, what)
        out = np.zeros(arr.shape, dtype=np.int64)
        flat, o = arr.reshape(-1), out.reshape(-1)
        f, top = self.frac_bits, self.max_raw
        # entries equal to 0 encode to raw 0 in every format: only the others are
        # visited (the compiled programs' weight matrices are ~1% nonzero)
        for i in np.flatnonzero(flat != 0).tolist():
            x = flat[i]
            t = type(x)
            if t is Fraction or t is int:
                num, den = (x.numerator, x.denominator) if t is Fraction else (x, 1)
                if num == 0:
                    continue
                k = den.bit_length() - 1
                if den == 1 << k and k <= f:
                    r = num << (f - k)
                    if -top <= r <= top:
                        o[i] = r
                        continue
            idx = [int(j) for j in np.unravel_index(i, arr.shape)] if arr.ndim else []
            o[i] = self.encode(x, exact=exact, what=f"{what}{idx}")
        return out

    def _encode_wide(self, arr: np.ndarray, exact: bool, what: str) -> np.ndarray:
        """:meth:`encode_array` in two-limb storage: shape + (2,), limbs (hi, lo) of
        constructions/machine/wide.py."""
        out = np.zeros(arr.shape + (2,), dtype=np.int64)
        flat, o = arr.reshape(-1), out.reshape(-1, 2)
        for i in np.flatnonzero(flat != 0).tolist():
            idx = [int(j) for j in np.unravel_index(i, arr.shape)] if arr.ndim else []
            o[i] = W.to_limbs(self.encode(flat[i], exact=exact, what=f"{what}{idx}"))
        return out

    def decode(self, raw) -> Fraction:
        """The value of a raw: an int, or (two-limb storage) a pair of limbs."""
        if self.wide and np.ndim(raw) == 1:
            raw = W.from_limbs(raw[0], raw[1])
        return Fraction(int(raw), 1 << self.frac_bits)

    def to_float(self, raw) -> np.ndarray:
        raw = np.asarray(raw)
        if self.wide and raw.ndim and raw.shape[-1] == 2:
            return (raw[..., 0].astype(np.float64) * 2.0 ** 63 + raw[..., 1].astype(np.float64)) \
                / float(1 << self.frac_bits)
        return np.asarray(raw, dtype=np.float64) / float(1 << self.frac_bits)

    def used_int_bits(self, err: np.ndarray) -> int:
        """Integer bits actually touched, from ``err[E_MAXABS]`` (and, in a wide
        error array, its high limb)."""
        return max(0, max_abs_raw(err).bit_length() - self.frac_bits)

    # -- error handling
    def check(self, err: np.ndarray, where: str = "") -> None:
        """Raise the error a kernel recorded in ``err`` (no-op if none)."""
        check_err(err, self, where)

    # -- scalar operations on raws (convenience for tests and notebooks)
    def _call(self, fn, *args):
        if self.wide:
            return self._call_wide(fn.__name__, *args)
        err = new_err()
        r = fn(*[np.int64(a) for a in args], *self.args, err)
        self.check(err, fn.__name__ if hasattr(fn, "__name__") else "")
        return int(r)

    def _call_wide(self, name: str, *args) -> int:
        """A scalar operation of constructions/machine/wide.py on Python int raws."""
        self._check_raws(np.array(args, dtype=object), "operands")
        err = W.new_wide_err()
        limbs = [v for a in args for v in W.to_limbs(a)]
        if name == "fx_exp":
            if args[0] > 0:
                raise ValueError(f"{self.name}: exp on two limbs takes a <= 0 (the softmax shifts)")
            if self.frac_bits <= WA.EXP_INT64_MAX_FRAC_BITS and args[0] >= -(1 << 62):
                e = new_err()
                r = fx_exp(np.int64(args[0]), min(self.int_bits, 62 - self.frac_bits), self.frac_bits,
                           self.mode_code, e)
                self.check(e, "exp")
                return int(r)
            D, m63 = -args[0], (1 << 63) - 1          # the softmax's path past f = 56: three magnitude limbs
            h, lo = WA.exp_shift_wide(np.int64(D >> 126), np.int64((D >> 63) & m63), np.int64(D & m63),
                                       self.int_bits, self.frac_bits, self.mode_code, err, new_err())
            self.check(err, "exp")
            return W.from_limbs(h, lo)
        fn = {"fx_add": W.w_add, "fx_sub": W.w_sub, "fx_div": W.w_div}.get(name)
        if name == "fx_mul":
            h, lo = W.w_mul(*[np.int64(v) for v in limbs], *self.args, err, W.new_scratch())
        else:
            h, lo = fn(*[np.int64(v) for v in limbs], *self.args, err)
        self.check(err, name[3:])
        return W.from_limbs(h, lo)

    def add(self, a: int, b: int) -> int:
        return self._call(fx_add, a, b)

    def sub(self, a: int, b: int) -> int:
        return self._call(fx_sub, a, b)

    def mul(self, a: int, b: int) -> int:
        return self._call(fx_mul, a, b)

    def div(self, a: int, b: int) -> int:
        return self._call(fx_div, a, b)

    def exp(self, a: int) -> int:
        return self._call(fx_exp, a)

    def attend(self, scores, values) -> tuple[np.ndarray, np.ndarray]:
        """Softmax attention of raw ``scores`` (m,) over raw ``values`` (m, d):
        returns (weights (m,), output (d,)) as raws."""
        if self.wide:
            raise ValueError(f"{self.name}: attend takes int64 raws; a two-limb model runs softmax in "
                             f"constructions/wide_attention.w_attend")
        s = np.ascontiguousarray(scores, dtype=np.int64)
        v = np.ascontiguousarray(values, dtype=np.int64)
        if v.ndim != 2 or v.shape[0] != s.shape[0]:
            raise ValueError(f"values must be (m, d) with m = len(scores) = {s.shape[0]}, got {v.shape}")
        self._check_raws(s, "scores")
        self._check_raws(v, "values")
        err = new_err()
        w = np.zeros(s.shape[0], dtype=np.int64)
        out = np.zeros(v.shape[1], dtype=np.int64)
        fx_attend(s, s.shape[0], v, *self.args, err, w, out)
        self.check(err, "softmax attention")
        return w, out

    def _check_raws(self, arr: np.ndarray, what: str) -> None:
        if arr.size and int(np.abs(arr).max()) > self.max_raw:
            bad = int(np.argmax(np.abs(arr).ravel()))
            raise ValueError(f"{what}: raw value {int(arr.ravel()[bad])} is outside {self.name}")
