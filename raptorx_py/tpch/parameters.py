"""TPC-H substitution parameters: the specification's validation ("qualification") values,
and seeded sets drawn by its rules (TPC-H 3.0, clause 2.4, as ``qgen`` draws them).

Why: a benchmark of ad hoc queries needs queries that do not repeat, with a new date, segment,
region, brand or size each, but reproducible from a seed. ``queries/qNN.sql`` hold
placeholders (``{DATE}``, ``{REGION}``, ...) that ``queries.query_text`` fills from a set
here; the validation set gives the specification's qualification texts.

Contract
--------
* ``VALIDATION[n]`` maps every placeholder of query ``n`` to its validation value, as the SQL
  literal's text (inside the quotes the query writes: ``1994-01-01``, ``Brand#45``, ``0.06``).
* ``draw(n, rng)`` draws one set for query ``n`` by the specification's rules from
  ``rng`` (a ``random.Random``); ``parameter_set(seed)`` draws all 22 from one seed, the
  same seed always giving the same texts. Values that must differ (Q7's two nations, Q12's
  two ship modes, Q16's eight sizes, Q22's seven country codes) differ.
* Q8's REGION is the region of its NATION; Q11's FRACTION depends on the scale factor and
  stays ``queries.q11_fraction``.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Mapping

__all__ = ["NATIONS", "VALIDATION", "draw", "parameter_set"]

#: N_NAME -> R_NAME, in N_NATIONKEY order (clause 4.2.3).
NATIONS: dict[str, str] = {
    "ALGERIA": "AFRICA",
    "ARGENTINA": "AMERICA",
    "BRAZIL": "AMERICA",
    "CANADA": "AMERICA",
    "EGYPT": "MIDDLE EAST",
    "ETHIOPIA": "AFRICA",
    "FRANCE": "EUROPE",
    "GERMANY": "EUROPE",
    "INDIA": "ASIA",
    "INDONESIA": "ASIA",
    "IRAN": "MIDDLE EAST",
    "IRAQ": "MIDDLE EAST",
    "JAPAN": "ASIA",
    "JORDAN": "MIDDLE EAST",
    "KENYA": "AFRICA",
    "MOROCCO": "AFRICA",
    "MOZAMBIQUE": "AFRICA",
    "PERU": "AMERICA",
    "CHINA": "ASIA",
    "ROMANIA": "EUROPE",
    "SAUDI ARABIA": "MIDDLE EAST",
    "VIETNAM": "ASIA",
    "RUSSIA": "EUROPE",
    "UNITED KINGDOM": "EUROPE",
    "UNITED STATES": "AMERICA",
}
REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
#: P_TYPE's three syllables (clause 4.2.2.13).
TYPE_SYLLABLE_1 = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
TYPE_SYLLABLE_2 = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
TYPE_SYLLABLE_3 = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
#: P_CONTAINER's two syllables.
CONTAINER_SYLLABLE_1 = ("SM", "LG", "MED", "JUMBO", "WRAP")
CONTAINER_SYLLABLE_2 = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")
SHIP_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
#: The words P_NAME is made of (clause 4.2.3), from which COLOR is drawn.
COLORS = (
    "almond antique aquamarine azure beige bisque black blanched blue blush brown burlywood "
    "burnished chartreuse chiffon chocolate coral cornflower cornsilk cream cyan dark deep "
    "dim dodger drab firebrick floral forest frosted gainsboro ghost goldenrod green grey "
    "honeydew hot indian ivory khaki lace lavender lawn lemon light lime linen magenta maroon "
    "medium metallic midnight mint misty moccasin navajo navy olive orange orchid pale papaya "
    "peach peru pink plum powder puff purple red rose rosy royal saddle salmon sandy seashell "
    "sienna sky slate smoke snow spring steel tan thistle tomato turquoise violet wheat white "
    "yellow"
).split()
Q13_WORD1 = ("special", "pending", "unusual", "express")
Q13_WORD2 = ("packages", "requests", "accounts", "deposits")

VALIDATION: dict[int, dict[str, str]] = {
    1: {"DELTA": "90"},
    2: {"SIZE": "15", "TYPE": "BRASS", "REGION": "EUROPE"},
    3: {"SEGMENT": "BUILDING", "DATE": "1995-03-15"},
    4: {"DATE": "1993-07-01"},
    5: {"REGION": "ASIA", "DATE": "1994-01-01"},
    6: {"DATE": "1994-01-01", "DISCOUNT": "0.06", "QUANTITY": "24"},
    7: {"NATION1": "FRANCE", "NATION2": "GERMANY"},
    8: {"NATION": "BRAZIL", "REGION": "AMERICA", "TYPE": "ECONOMY ANODIZED STEEL"},
    9: {"COLOR": "green"},
    10: {"DATE": "1993-10-01"},
    11: {"NATION": "GERMANY"},
    12: {"SHIPMODE1": "MAIL", "SHIPMODE2": "SHIP", "DATE": "1994-01-01"},
    13: {"WORD1": "special", "WORD2": "requests"},
    14: {"DATE": "1995-09-01"},
    15: {"DATE": "1996-01-01"},
    16: {
        "BRAND": "Brand#45",
        "TYPE": "MEDIUM POLISHED",
        **{f"SIZE{i + 1}": str(s) for i, s in enumerate((49, 14, 23, 45, 19, 3, 36, 9))},
    },
    17: {"BRAND": "Brand#23", "CONTAINER": "MED BOX"},
    18: {"QUANTITY": "300"},
    19: {
        "QUANTITY1": "1",
        "QUANTITY2": "10",
        "QUANTITY3": "20",
        "BRAND1": "Brand#12",
        "BRAND2": "Brand#23",
        "BRAND3": "Brand#34",
    },
    20: {"COLOR": "forest", "DATE": "1994-01-01", "NATION": "CANADA"},
    21: {"NATION": "SAUDI ARABIA"},
    22: {f"I{i + 1}": code for i, code in enumerate(("13", "31", "23", "29", "30", "18", "17"))},
}


def _month(first: tuple[int, int], last: tuple[int, int], rng: random.Random) -> str:
    """The first day of a month drawn uniformly from ``first`` to ``last`` (year, month)."""
    start, end = first[0] * 12 + first[1] - 1, last[0] * 12 + last[1] - 1
    k = rng.randint(start, end)
    return dt.date(k // 12, k % 12 + 1, 1).isoformat()


def _year(rng: random.Random) -> str:
    """January 1st of a year drawn from 1993 to 1997."""
    return dt.date(rng.randint(1993, 1997), 1, 1).isoformat()


def _brand(rng: random.Random) -> str:
    return f"Brand#{rng.randint(1, 5)}{rng.randint(1, 5)}"


def _nation(rng: random.Random) -> str:
    return rng.choice(list(NATIONS))


def draw(n: int, rng: random.Random) -> dict[str, str]:
    """One substitution set for query ``n`` by the specification's rules (clause 2.4)."""
    if n == 1:
        return {"DELTA": str(rng.randint(60, 120))}
    if n == 2:
        return {
            "SIZE": str(rng.randint(1, 50)),
            "TYPE": rng.choice(TYPE_SYLLABLE_3),
            "REGION": rng.choice(REGIONS),
        }
    if n == 3:
        day = dt.date(1995, 3, 1) + dt.timedelta(days=rng.randint(0, 30))
        return {"SEGMENT": rng.choice(SEGMENTS), "DATE": day.isoformat()}
    if n in (4, 15):
        return {"DATE": _month((1993, 1), (1997, 10), rng)}
    if n == 5:
        return {"REGION": rng.choice(REGIONS), "DATE": _year(rng)}
    if n == 6:
        return {
            "DATE": _year(rng),
            "DISCOUNT": f"0.0{rng.randint(2, 9)}",
            "QUANTITY": str(rng.randint(24, 25)),
        }
    if n == 7:
        first, second = rng.sample(list(NATIONS), 2)
        return {"NATION1": first, "NATION2": second}
    if n == 8:
        nation = _nation(rng)
        kind = " ".join(rng.choice(s) for s in (TYPE_SYLLABLE_1, TYPE_SYLLABLE_2, TYPE_SYLLABLE_3))
        return {"NATION": nation, "REGION": NATIONS[nation], "TYPE": kind}
    if n == 9:
        return {"COLOR": rng.choice(COLORS)}
    if n == 10:
        return {"DATE": _month((1993, 2), (1995, 1), rng)}
    if n in (11, 21):
        return {"NATION": _nation(rng)}
    if n == 12:
        first, second = rng.sample(SHIP_MODES, 2)
        return {"SHIPMODE1": first, "SHIPMODE2": second, "DATE": _year(rng)}
    if n == 13:
        return {"WORD1": rng.choice(Q13_WORD1), "WORD2": rng.choice(Q13_WORD2)}
    if n == 14:
        return {"DATE": _month((1993, 1), (1997, 12), rng)}
    if n == 16:
        sizes = rng.sample(range(1, 51), 8)
        kind = f"{rng.choice(TYPE_SYLLABLE_1)} {rng.choice(TYPE_SYLLABLE_2)}"
        return {
            "BRAND": _brand(rng),
            "TYPE": kind,
            **{f"SIZE{i + 1}": str(s) for i, s in enumerate(sizes)},
        }
    if n == 17:
        container = f"{rng.choice(CONTAINER_SYLLABLE_1)} {rng.choice(CONTAINER_SYLLABLE_2)}"
        return {"BRAND": _brand(rng), "CONTAINER": container}
    if n == 18:
        return {"QUANTITY": str(rng.randint(312, 315))}
    if n == 19:
        return {
            "QUANTITY1": str(rng.randint(1, 10)),
            "QUANTITY2": str(rng.randint(10, 20)),
            "QUANTITY3": str(rng.randint(20, 30)),
            "BRAND1": _brand(rng),
            "BRAND2": _brand(rng),
            "BRAND3": _brand(rng),
        }
    if n == 20:
        return {"COLOR": rng.choice(COLORS), "DATE": _year(rng), "NATION": _nation(rng)}
    if n == 22:
        codes = rng.sample(range(10, 35), 7)  # C_PHONE's country code: N_NATIONKEY + 10
        return {f"I{i + 1}": str(c) for i, c in enumerate(codes)}
    raise ValueError(f"TPC-H query number must be 1..22, got {n!r}")


def parameter_set(seed: int) -> dict[int, Mapping[str, str]]:
    """A substitution set for each of the 22 queries, drawn from one seeded generator."""
    rng = random.Random(seed)
    return {n: draw(n, rng) for n in range(1, 23)}
