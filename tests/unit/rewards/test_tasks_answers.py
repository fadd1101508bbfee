"""Answer extraction rules (daca_bench.rewards.answers), table-driven: the anchors' defects included."""

import pytest

from daca_bench.rewards import answers as A

TAGGED = [
    ("<answer>42</answer>", "42"),
    ("<answer>\n  line one\n  line two\n</answer>", "line one\n  line two"),  # multi-line (d1 missed it)
    ("<answer>1</answer> then <answer>2</answer>", "2"),  # the last one
    ("<ANSWER>7</ANSWER>", "7"),
    ("<answer>unclosed", None),
    ("no tags", None),
]


@pytest.mark.parametrize("text,expected", TAGGED)
def test_tagged(text, expected):
    assert A.tagged(text) == expected


BOXED = [
    (r"so \boxed{5}", "5"),  # d1's "\b" regex never matched this
    (r"\boxed{\frac{1}{2}} and later \boxed{3}", "3"),
    (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
    (r"\boxed{a{b}c}", "a{b}c"),
    (r"\boxed{unbalanced", None),
    (r"\fbox{9}", "9"),
]


@pytest.mark.parametrize("text,expected", BOXED)
def test_last_boxed(text, expected):
    assert A.last_boxed(text) == expected


MATH = [
    ("<answer>\nThe answer\nis 12\n</answer>", ("The answer\nis 12", "tag")),
    (r"<answer>so \boxed{4}</answer>", ("4", "tag+boxed")),
    ("<answer></answer>", (None, "empty_tag")),
    (r"blah \boxed{7} #### 8", ("7", "boxed")),
    ("work\n#### 1,234", ("1,234", "hash")),
    ("it costs $5, then 6.5 more", ("6.5", "last_number")),
    ("5-9 is what", ("9", "last_number")),  # a minus glued to a digit is an operator
    ("it is -3.", ("-3", "last_number")),
    ("", (None, "none")),
    ("no digits", (None, "none")),
]


@pytest.mark.parametrize("text,expected", MATH)
def test_math_answer(text, expected):
    assert A.math_answer(text) == expected


def test_gold_math_answer():
    assert A.gold_math_answer("3*4=<<3*4=12>>12\n#### 12") == "12"
    assert A.gold_math_answer(r"so $\boxed{\frac{1}{2}}$") == r"\frac{1}{2}"
    assert A.gold_math_answer(" 7 ") == "7"


DIGITS = [
    ("1234341243212143", 16, "1234341243212143"),
    ("1 2 3 4\n3 4 1 2\n4 3 2 1\n2 1 4 3", 16, "1234341243212143"),
    ("[[1,2,3,4],[3,4,1,2],[4,3,2,1],[2,1,4,3]]", 16, "1234341243212143"),
    ("first 1111222233334444 then 1234341243212143", 16, "1234341243212143"),
    ("row 1234 row 3412", 16, None),  # words break runs
    ("12343412432121431", 16, "2343412432121431"),  # a longer run: its last N*N digits
]


@pytest.mark.parametrize("text,count,expected", DIGITS)
def test_digit_run(text, count, expected):
    assert A.digit_run(text, count) == expected


JSON = [
    ('{"a": 1}', ('{"a": 1}', "value")),
    ('Sure: {"a": "}"} and {"b": 2}', ('{"a": "}"}', "value")),  # the first balanced value, string-aware
    ('text ```json\n{"a": 1}\n``` and ```json\n{"a": 2}\n```', ('{"a": 2}', "fence")),
    ("<answer>[1, 2]</answer>", ("[1, 2]", "tag+value")),
    ("<answer>not json</answer>", ("not json", "tag")),  # tagged: an answer, just invalid
    ("<answer></answer>", (None, "empty_tag")),
    ("42", ("42", "value")),
    ('{"open": ', ('{"open":', "value")),  # unbalanced: found, will not parse
    ("hello there", (None, "none")),
    ("", (None, "none")),
]


@pytest.mark.parametrize("text,expected", JSON)
def test_json_answer(text, expected):
    assert A.json_answer(text) == expected


def test_loads_strict_refuses_nan_and_duplicates():
    with pytest.raises(ValueError):
        A.loads_strict('{"a": NaN}')
    with pytest.raises(ValueError):
        A.loads_strict('{"a": 1, "a": 2}')
    assert A.loads_strict('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}


CODE = [
    ("```python\ndef f():\n    return 1\n```", ("def f():\n    return 1\n", "fence")),
    ("```py\na=1\n```\ntext\n```python\nb=2\n```", ("b=2\n", "fence")),  # the last block
    ("```\nc=3\n```", ("c=3\n", "fence")),
    ("```bash\nls\n```\n```python\nd=4\n", ("d=4\n", "open_fence")),
    ("    return x\n```\nextra", ("    return x\n", "continuation")),
    ("    return x\n", ("    return x\n", "continuation")),
    ("<answer>x = 1</answer>", ("x = 1", "tag+continuation")),
]


@pytest.mark.parametrize("text,expected", CODE)
def test_code_answer(text, expected):
    assert A.code_answer(text) == expected
