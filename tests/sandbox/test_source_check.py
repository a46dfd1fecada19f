"""The source check's family of class-building escapes (issue 23): a
metaclass built at run time by three-argument `type()`, a class whose
`__match_args__` names `__globals__`, bound to a name a positional class
pattern trusts (`int`, `str`), read by `case int(v):`.  The check refuses
each step with a readable message; past the check, the block's `type` itself
refuses to build classes, so the chain breaks at run time too (and the OS
layer, tests/sandbox/test_os_layer.py, holds whatever happens)."""

from __future__ import annotations

import pytest

from flowforge.sandbox import SandboxError, check_source, run_python
from tests.sandbox.test_escapes import block, mode  # noqa: F401

D = "'_' * 2"        # dunder names built at run time, so no string constant names one
ISSUE_23 = "import json\n" + block(f"""
M = type('M', (type,), {{{D} + 'instancecheck' + {D}: lambda cls, obj: True}})
C = M('C', (), {{{D} + 'match' + '_args' + {D}: ({D} + 'globals' + {D},)}})
int = C
match json.dumps:
    case int(g):
        return {{'g': str(g)}}
return {{}}
""")


def test_the_issue_23_escape_is_refused_with_readable_reasons():
    problems = " | ".join(check_source(ISSUE_23))
    assert "type() takes exactly one argument" in problems
    assert "'int' names a built-in type and cannot be rebound" in problems


@pytest.mark.parametrize("attempt", [
    "int = dict\nreturn {}",
    "def f(str):\n    return str\nreturn {}",
    "for list in [1]:\n    pass\nreturn {}",
    "import json as dict\nreturn {}",
    "from json import loads as bytes\nreturn {}",
    "try:\n    pass\nexcept Exception as float:\n    pass\nreturn {}",
    "match 1:\n    case tuple:\n        return {}",
    "[set for set in (1,)]\nreturn {}",
    "(bool := 1)\nreturn {}",
    "class frozenset:\n    pass\nreturn {}",
    "global bytearray\nreturn {}",
    "del int\nreturn {}",
], ids=["assign", "argument", "for", "import-as", "from-import-as", "except-as",
        "match-capture", "comprehension", "walrus", "class", "global", "del"])
def test_names_a_class_pattern_trusts_cannot_be_rebound(attempt):
    problems = check_source(block(attempt))
    assert any("cannot be rebound" in p for p in problems), problems


@pytest.mark.parametrize("attempt, expected", [
    ("M = type('M', (), {})\nreturn {}", "type() takes exactly one argument"),
    ("M = type(name='M')\nreturn {}", "type() takes exactly one argument"),
    ("class M(type):\n    pass\nreturn {}", "classes derived from type"),
    ("class C:\n    pass\nmatch C():\n    case C(x):\n        return {}\nreturn {}",
     "positional class patterns are allowed only on built-in types"),
    ("import json\nmatch 1:\n    case json.JSONDecoder(x):\n        return {}\nreturn {}",
     "positional class patterns are allowed only on built-in types"),
    ("x = ('__match_args__',)\nreturn {}", "text naming a special attribute"),
])
def test_class_building_and_trusted_patterns_are_refused(attempt, expected):
    problems = " | ".join(check_source(block(attempt)))
    assert expected in problems


@pytest.mark.parametrize("attempt", [
    "t = type\nM = t('M', (t,), {})\nreturn {}",
    "M = type(int)('M', (), {})\nreturn {}",
    "import collections.abc\nmeta = type(collections.abc.Mapping)\n"
    "M = meta('M', (meta,), {})\nreturn {}",
], ids=["alias", "type-of-a-class", "abcmeta"])
async def test_past_the_check_the_blocks_type_builds_no_class(mode, attempt):
    """What the check cannot see (an alias, the type of a class) meets the
    block's `type`, which takes one argument and never hands out a metaclass."""
    assert check_source(block(attempt)) == []
    with pytest.raises(SandboxError) as info:
        await run_python(block(attempt), {}, mode=mode)
    assert info.value.kind == "error"
    assert "type() takes exactly one argument in a sandboxed block" in str(info.value)


async def test_the_whole_chain_fails_at_run_time_even_unchecked(mode):
    with pytest.raises(SandboxError) as info:
        await run_python(ISSUE_23, {}, mode=mode, check=False)
    assert info.value.kind == "error" and "TypeError" in str(info.value)
    assert "globals" not in str(info.value)


async def test_ordinary_uses_of_type_still_work(mode):
    source = block("""
class Point:
    def __init__(self, x):
        self.x = x
p = Point(2)
twin = type(p)(3)
match 5:
    case int(n):
        found = n
return {'same': type(3) is int, 'twin': twin.x, 'empty': type([])(), 'found': found,
        'name_ok': type(p) is Point}
""")
    result = await run_python(source, {}, mode=mode)
    assert result.output == {"same": True, "twin": 3, "empty": [], "found": 5, "name_ok": True}


# -- issue 41: format strings and copy's reducer table ----------------------------------

FUNCTION = "def f():\n    pass\n"


@pytest.mark.parametrize("attempt, expected", [
    (FUNCTION + f"return {{'g': ('{{0.' + {D} + 'globals' + {D} + '}}').format(f)}}",
     "`.format` is allowed only on a string literal"),
    (FUNCTION + f"return {{'g': str.format('{{0.' + {D} + 'globals' + {D} + '}}', f)}}",
     "`.format` is allowed only on a string literal"),
    (FUNCTION + f"t = '{{x.' + {D} + 'init' + {D} + '.' + {D} + 'globals' + {D} + '}}'\n"
     "return {'g': t.format(x=f)}", "`.format` is allowed only on a string literal"),
    (FUNCTION + "fmt = '{0}'.format\nreturn {'g': fmt(f)}",
     "`.format` may only be called directly"),
    (FUNCTION + "return {'g': '{0._x}'.format(f)}", "may not read a private attribute"),
    (FUNCTION + "return {'g': '{0:{1._x}}'.format(3, f)}", "may not read a private attribute"),
    (FUNCTION + "return {'g': str.format_map('{x}', {'x': f})}", "attribute 'format_map'"),
    (FUNCTION + "return {'g': '{0.__globals__}'.format(f)}", "text naming a special attribute"),
], ids=["computed", "str-format-computed", "variable-template", "bound-method",
        "private-field", "nested-spec", "format-map", "literal-dunder"])
def test_format_strings_cannot_read_attributes_the_source_does_not_show(attempt, expected):
    problems = " | ".join(check_source(block(attempt)))
    assert expected in problems, problems


@pytest.mark.parametrize("attempt", [
    "import copy\n" + block(f"""
class C:
    pass
def reducer(obj):
    return (C, (), None, None, None)
copy.dispatch_table[C] = reducer
return {{'c': str(copy.deepcopy(C()))}}
"""),
    "from copy import dispatch_table\n" + block("return {}"),
    "import copy\n" + block("table = copy.dispatch_table\nreturn {}"),
], ids=["deepcopy-reducer", "from-import", "alias"])
def test_copys_reducer_table_is_refused(attempt):
    problems = " | ".join(check_source(attempt))
    assert "dispatch_table" in problems and "not allowed" in problems, problems


def test_plain_format_strings_and_copies_still_pass():
    assert check_source("import copy\n" + block(
        "a = '{0} and {name:>{width}}'.format(1, name='x', width=3)\n"
        "b = str.format('{}!', a)\n"
        "return {'a': a, 'b': b, 'c': copy.deepcopy({'k': [1]})}")) == []


async def test_the_blocks_copy_module_has_no_reducer_table(mode):
    """Past the check too: the copy of `copy` a block imports leaves it out."""
    source = "import copy\n" + block("return {'has': hasattr(copy, 'dispatch_table'), "
                                     "'x': '{0}-{1}'.format(1, 2)}")
    result = await run_python(source, {}, mode=mode)
    assert result.output == {"has": False, "x": "1-2"}
