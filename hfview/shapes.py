"""What a value read from a checkpoint's JSON must look like, in the words an error uses: rules, and the one
routine that applies them (config.json's values, tokenizer files' fields). A rule checks a value's type and
range; `within` and `items` name the rules of an object's keys and a list's items, so an error can name the
exact place at fault ("rope_scaling.factor", "added_tokens[3].content")."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

U32_MAX = 2**32 - 1
F32_MAX = 3.4028234663852886e38  # GGUF stores these numbers as float32


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    if is_int(v):
        return abs(v) <= F32_MAX
    return isinstance(v, float) and math.isfinite(v) and abs(v) <= F32_MAX


@dataclass(frozen=True)
class Rule:
    expect: str
    test: Callable[[Any], bool]
    nullable: bool = False
    within: dict[str, "Rule"] | None = None  # an object's keys: each checked where stated
    items: "Rule | None" = None              # a list's items
    values: "Rule | None" = None             # every value of an object (a map from names)

    def ok(self, v) -> bool:
        return (v is None and self.nullable) or (v is not None and self.test(v))

    def or_null(self) -> "Rule":
        return replace(self, nullable=True, expect=f"{self.expect}, or null")

    def replace_test(self, expect: str, test: Callable[[Any], bool]) -> "Rule":
        """The same nested rules under a stricter test of the value itself."""
        return replace(self, expect=expect, test=test)


COUNT = Rule("an integer from 1 to 4294967295", lambda v: is_int(v) and 1 <= v <= U32_MAX)
INT = Rule("an integer", lambda v: is_int(v) and -2**63 <= v < 2**64)
ID = Rule("an integer from 0 to 4294967295", lambda v: is_int(v) and 0 <= v <= U32_MAX)  # a token id
NUMBER = Rule("a finite number", _number)
POSITIVE = Rule("a number > 0", lambda v: _number(v) and v > 0)
NON_NEGATIVE = Rule("a number >= 0", lambda v: _number(v) and v >= 0)
FRACTION = Rule("a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1)
BOOL = Rule("true or false", lambda v: isinstance(v, bool))
STRING = Rule("a string", lambda v: isinstance(v, str))
OBJECT = Rule("an object", lambda v: isinstance(v, dict))
LIST = Rule("a list", lambda v: isinstance(v, list))
ANY = Rule("anything", lambda v: True)
TOKEN_IDS = Rule("a token id (an integer) or a list of them",
                 lambda v: INT.test(v) or isinstance(v, list) and all(map(INT.test, v))).or_null()


def list_of(item: Rule) -> Rule:
    return Rule("a list", lambda v: isinstance(v, list), items=item)


def object_of(keys: dict[str, Rule] | None = None, values: Rule | None = None, required: tuple[str, ...] = ()) -> Rule:
    expect = f"an object with {', '.join(required)}" if required else "an object"
    return Rule(expect, lambda v: isinstance(v, dict) and all(k in v for k in required), within=keys, values=values)


def any_of(*rules: Rule) -> Rule:
    return Rule(" or ".join(r.expect for r in rules), lambda v: any(r.ok(v) for r in rules))


def check(value, rule: Rule, where: str, refuse: Callable[[str, Any, Rule], Exception]) -> None:
    """`value` (found at `where`) against `rule`; `refuse(where, value, rule)` makes the error to raise."""
    if not rule.ok(value):
        raise refuse(where, value, rule)
    if rule.items is not None and isinstance(value, list):
        for i, item in enumerate(value):
            check(item, rule.items, f"{where}[{i}]", refuse)
    if isinstance(value, dict):
        for key, sub in value.items():
            if rule.within and key in rule.within:
                check(sub, rule.within[key], f"{where}.{key}" if where else key, refuse)
            elif rule.values is not None:
                check(sub, rule.values, f"{where}[{key!r}]", refuse)
