"""scripts/warm_test_cache.py writes the rewritten-assert cache that `make test`'s
workers read instead of rewriting every test module each: it must be a cache
pytest itself accepts, with pytest's rewritten asserts in it."""

from __future__ import annotations

from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc

from tests.script_modules import script


def _script():
    return script("warm_test_cache")


def test_the_written_cache_is_read_by_pytest_with_its_asserts_rewritten(tmp_path):
    test = tmp_path / "test_sample.py"
    test.write_text("def test_it():\n    left, right = [1, 2], [1, 3]\n    assert left == right\n")
    assert _script()._warm([test]) == 1
    code = _read_pyc(test, tmp_path / "__pycache__" / ("test_sample" + PYC_TAIL))
    assert code is not None                           # pytest reads it: not rewritten again
    namespace: dict = {}
    exec(code, namespace)
    try:
        namespace["test_it"]()
    except AssertionError as exc:
        assert "[1, 2] == [1, 3]" in str(exc)         # pytest's explanation, not a bare assert
    else:
        raise AssertionError("the sample's assert did not fail")


def test_an_edited_test_is_not_served_from_the_cache(tmp_path):
    test = tmp_path / "test_sample.py"
    test.write_text("def test_it():\n    assert True\n")
    _script()._warm([test])
    test.write_text("def test_it():\n    assert False\n")
    assert _read_pyc(test, tmp_path / "__pycache__" / ("test_sample" + PYC_TAIL)) is None
