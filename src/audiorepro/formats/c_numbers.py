"""Numbers read as C's ``atof`` and ``atol`` read them (glibc, the "C" locale), which is how
trec_eval reads every number of its inputs and options.

``atof(s)`` is ``strtod(s, NULL)``: leading white space (``" \\t\\n\\v\\f\\r"``) skipped, an
optional sign, then the longest prefix that is one of

- a decimal: digits with an optional ``.`` and fraction (at least one digit), then an optional
  exponent ``e``/``E`` with an optional sign and at least one digit;
- a hexadecimal float: ``0x``/``0X``, hex digits with an optional ``.`` (at least one digit),
  then an optional binary exponent ``p``/``P`` with at least one decimal digit (``0x10`` is
  16, ``0x1p4`` 16; ``0x`` alone reads as its ``0``);
- ``inf`` or ``infinity``, ``nan`` or ``nan(chars)`` (any case);

correctly rounded to a double (overflow gives +-inf, as ``HUGE_VAL``); anything after the
prefix is ignored, and no prefix reads as 0.

``atol(s)`` is ``strtol(s, NULL, 10)``: white space, an optional sign, decimal digits only
(``0x10`` reads as 0), saturating at ``LONG_MIN``/``LONG_MAX`` (64-bit ``long``).
"""

from __future__ import annotations

import re

#: glibc's ``isspace`` in the "C" locale.
C_SPACE = " \t\n\v\f\r"
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

_HEX = re.compile(
    r"0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?)", re.ASCII
)
_DECIMAL = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_SPECIAL = re.compile(r"(infinity|inf|nan(?:\([0-9A-Za-z_]*\))?)", re.ASCII | re.IGNORECASE)
_LONG = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _hex_value(body: str) -> float:
    """A hexadecimal float's value (``body`` after ``0x``), correctly rounded."""
    if "p" not in body.lower():
        body += "p0"
    mantissa, _, exponent = body.lower().partition("p")
    # float.fromhex reads the same syntax; an exponent far outside the double range is
    # clamped first (fromhex raises on overflow where strtod returns HUGE_VAL).
    e = max(-100_000, min(100_000, int(exponent)))
    try:
        return float.fromhex(f"0x{mantissa}p{e}")
    except OverflowError:
        return float("inf")


def c_atof(text: str) -> float:
    """C ``atof`` (module docstring): the value of the longest leading number, 0 if none.

    >>> c_atof(".25"), c_atof("-1e-1x"), c_atof("p"), c_atof("  \\t7")
    (0.25, -0.1, 0.0, 7.0)
    >>> c_atof("0x10"), c_atof("0x1p4"), c_atof("-0X.8"), c_atof("0xg"), c_atof("0x1p")
    (16.0, 16.0, -0.5, 0.0, 1.0)
    >>> c_atof("inf"), c_atof("-Infinity"), c_atof("infinit"), c_atof("1e999")
    (inf, -inf, inf, inf)
    >>> c_atof("nan(0x1)"), c_atof("NaNx")
    (nan, nan)
    """
    s = text.lstrip(C_SPACE)
    sign = -1.0 if s[:1] == "-" else 1.0
    s = s[1:] if s[:1] in ("+", "-") else s
    special = _SPECIAL.match(s)
    if special:
        word = special.group(1).lower()
        return sign * float("inf") if word.startswith("inf") else float("nan")
    hexa = _HEX.match(s)
    if hexa:
        return sign * _hex_value(hexa.group(1))
    decimal = _DECIMAL.match(s)
    return sign * float(decimal.group(0)) if decimal else 0.0


def c_atol(text: str) -> int:
    """C ``atol`` (module docstring): leading blanks, a sign, decimal digits up to the first
    other character; saturating at the 64-bit ``long`` range.

    >>> c_atol("23.4"), c_atol(" -7x"), c_atol("x"), c_atol("0x10")
    (23, -7, 0, 0)
    >>> c_atol("9" * 5000) == LONG_MAX, c_atol("-" + "9" * 30) == LONG_MIN
    (True, True)
    """
    match = _LONG.match(text.lstrip(C_SPACE))
    if not match:
        return 0
    digits = match.group(0)
    negative = digits.startswith("-")
    magnitude = digits.lstrip("+-").lstrip("0")
    if len(magnitude) > 19:  # past the range (and past Python's int() digit limit)
        return LONG_MIN if negative else LONG_MAX
    value = int(magnitude or "0")
    value = -value if negative else value
    return max(LONG_MIN, min(LONG_MAX, value))
