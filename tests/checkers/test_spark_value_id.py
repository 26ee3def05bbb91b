"""The Spark checkers name a value by the integer itself only when its JSON text is that
integer's canonical text (else by a 64-bit hash): checked against Python on tricky texts."""

import re

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

TRICKY = ["0", "-0", "7", "-7", "007", "-007", "+7", " 7", "7 ", "\t7", "7\n", "7.0", "7.",
          ".7", "7.5", "1e3", "0x10", "-", "", "--1", "1-", "1_000", "\u0663", "\uff14\uff12",
          '"42"', "[42]", "null", "true", "9223372036854775807", "9223372036854775808",
          "-9223372036854775808", "-9223372036854775809", "99999999999999999999",
          "00000000000000000001"]
POWERS = [str(sign * (10 ** p + d)) for p in range(19) for d in (-1, 0, 1) for sign in (1, -1)
          if -2 ** 63 <= sign * (10 ** p + d) < 2 ** 63]


def canonical_integer(text: str) -> bool:
    return (re.fullmatch(r"-?(0|[1-9][0-9]*)", text) is not None and text != "-0"
            and -2 ** 63 <= int(text) < 2 ** 63)


@pytest.mark.parametrize("by_text", [False, True], ids=["arithmetic-length", "text-length"])
def test_integer_texts_are_named_by_themselves_and_nothing_else(spark, by_text):
    from checkers.spark.tables import value_id

    texts = sorted(set(TRICKY + POWERS))
    frame = spark.createDataFrame([(t,) for t in texts], "value string")
    got = {row["value"]: (row["vtext"], row["vid"])
           for row in frame.select("value", *(c.alias(n) for c, n in zip(value_id(by_text), ("vtext", "vid"))))
           .collect()}
    assert sum(canonical_integer(t) for t in texts) > len(POWERS) // 2  # both kinds are here
    for text in texts:
        vtext, vid = got[text]
        assert vtext == (not canonical_integer(text)), text
        if not vtext:
            assert vid == int(text), text
