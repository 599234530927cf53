"""An instant's text (``format_instant``), made by arithmetic and a cache of days, is
the text of its datetime: isoformat from the year 1000 on, strftime before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from erstwhile.domain.time import format_instant, from_us, parse_instant

_FIRST, _LAST = -62_135_596_800_000_000, 253_402_300_799_999_999  # 0001-01-01 .. 9999-12-31


def _oracle(us: int) -> str:
    moment = from_us(us)
    if moment.year >= 1000:
        return moment.isoformat(timespec="microseconds")[:-6] + "Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_EDGES = st.sampled_from([
    _FIRST, _LAST, 0, -1, 1, -30_610_224_000_000_000, -30_610_224_000_000_001,
    951_782_400_000_000, 951_868_799_999_999, 1_709_164_800_000_000,  # 29 Feb 2000, 2024
])  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.integers(_FIRST, _LAST), _EDGES, st.integers(-(10**12), 10**12)))
def test_an_instants_text_is_its_datetimes(us: int) -> None:
    text = format_instant(us)
    assert text == _oracle(us)
    if from_us(us).year >= 1000:
        assert parse_instant(text, "t") == us
