"""Dollar figures as every summary prints them: enough significant digits that a small cost never
reads as $0.0000, a cost over a budget never prints equal to or under it, and a budget prints as
the user wrote it (0.00001, not 1e-05)."""

from __future__ import annotations

from decimal import Decimal

DECIMALS = 4
"""Decimals of a dollar figure of a cent or more (`usd`)."""
MOST_DECIMALS = 12
"""Decimals beyond which a figure is printed as Python's shortest round-trip text."""


def as_written(number: float) -> str:
    """A number from a config file without an exponent: 1e-05 as 0.00001, 0.5 as 0.5, 2.0 as 2."""
    return format(Decimal(repr(float(number))).normalize(), "f")


def usd(value: float) -> str:
    """'$0.0123', or a figure under $0.0001 with two significant digits ('$0.000012'); exactly
    zero stays '$0.0000'."""
    if value == 0 or abs(value) >= 10**-DECIMALS:
        return f"${value:.{DECIMALS}f}"
    return f"${_significant(value, 2)}"


def usd_against(value: float, limit: float) -> str:
    """`value` as `usd` prints it, with more decimals when it is over `limit` but would round to
    `limit` or under (or under it but would round over): the printed figure never contradicts
    the comparison."""
    small = value != 0 and abs(value) < 10**-DECIMALS
    return "$" + against(value, limit, _first_digit(value) + 1 if small else DECIMALS)


def against(value: float, limit: float, decimals: int) -> str:
    """`value` with at least `decimals` decimals, and as many more as it takes for the printed
    figure to stand on the same side of `limit` as the value does (over stays over)."""
    while decimals <= MOST_DECIMALS:
        if (round(value, decimals) > limit) == (value > limit):
            return f"{value:.{decimals}f}"
        decimals += 1
    return repr(value)


def signed_usd(value: float) -> str:
    """`usd` with its sign: '+$0.0012', '-$0.000034'."""
    sign = "-" if value < 0 else "+"
    return f"{sign}{usd(abs(value))}"


def _first_digit(value: float) -> int:
    """Decimals to the first significant digit of `value` (0 < |value| < 1)."""
    decimals = 0
    while abs(value) * 10**decimals < 1:
        decimals += 1
    return decimals


def _significant(value: float, digits: int) -> str:
    """`value` (0 < |value| < 1) with `digits` significant digits, in fixed notation."""
    return f"{value:.{_first_digit(value) + digits - 1}f}"
