"""The manual (issue 29): built strict from docs/ with its reference generated
from the code, complete, offline, its commands run as written, and served at
/manual/.

The site is built once per module into a scratch folder from a copy of
docs/, exactly as `make docs` builds it (the same generator, the same
mkdocs.yml, `--strict`), so the checkout is never written to."""

from __future__ import annotations

import html.parser
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MKDOCS = Path(sys.executable).parent / "mkdocs"
sys.path.insert(0, str(DOCS))
import gen_block_errors  # noqa: E402
import gen_common  # noqa: E402
import gen_reference  # noqa: E402


def build(tmp: Path, extra_page: str | None = None,
          generated: Path | None = None) -> subprocess.CompletedProcess:
    """Copy docs/, generate the reference into the copy (or copy the one
    already generated into `generated`), build it strict."""
    docs = tmp / "docs"
    shutil.copytree(DOCS, docs, ignore=shutil.ignore_patterns("reference", "__pycache__"))
    if generated is None:
        gen_reference.generate(docs / "reference")
    else:
        shutil.copytree(generated, docs / "reference")
    if extra_page is not None:
        (docs / "extra.md").write_text(extra_page)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config.update(docs_dir=str(docs), site_dir=str(tmp / "site"),
                  hooks=[str(docs / "hooks.py")])
    (tmp / "mkdocs.yml").write_text(yaml.safe_dump(config))
    return subprocess.run([str(MKDOCS), "build", "--strict", "-f", str(tmp / "mkdocs.yml")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("manual")
    result = build(tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp


def _build_pages(tmp: Path, pages: dict[str, str]) -> subprocess.CompletedProcess:
    """mkdocs.yml's settings (theme, plugins, validation, strict) on just `pages`
    ({file: markdown}): what the manual's own build decides about a link, in a
    second instead of a whole build."""
    docs = tmp / "docs"
    docs.mkdir(parents=True)
    for name, text in pages.items():
        (docs / name).write_text(text)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config.update(docs_dir=str(docs), site_dir=str(tmp / "site"), hooks=[],
                  nav=[{name.removesuffix(".md"): name} for name in pages])
    (tmp / "mkdocs.yml").write_text(yaml.safe_dump(config))
    return subprocess.run([str(MKDOCS), "build", "--strict", "-f", str(tmp / "mkdocs.yml")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_a_broken_link_fails_the_build(tmp_path):
    linked = {"index.md": "# Home\n", "extra.md": "# Extra\n\nSee [home](index.md).\n"}
    fine = _build_pages(tmp_path / "fine", linked)
    assert fine.returncode == 0, fine.stderr[-3000:]
    broken = _build_pages(tmp_path / "broken", {
        **linked, "extra.md": "# Extra\n\nSee [the missing page](reference/nothing-here.md).\n"})
    assert broken.returncode != 0
    assert "nothing-here.md" in broken.stderr


def test_a_block_example_the_code_refuses_fails_the_generator():
    """The examples in block docstrings are loaded as workflows: the http
    block's own, changed to a method it does not take, is refused by name."""
    import flowforge.blocks.http as http

    page = gen_common.docstring_markdown(gen_common.dedent_doc(http))
    assert "method: POST" in page and gen_reference.example_problems("http", page) == []
    problems = gen_reference.example_problems("http", page.replace("method: POST",
                                                                   "method: YEET"))
    assert len(problems) == 1 and "`http`" in problems[0] and "method" in problems[0]


def test_an_output_field_the_docs_and_the_code_disagree_on_fails_the_build(monkeypatch,
                                                                           tmp_path):
    """A block's output table is its `outputs` declaration; validation reads
    `output_fields`.  Where they part, in either direction, or where an open
    output does not say so, the generator names the block and the field, and
    `make docs` (the generator) fails."""
    from flowforge.blocks.base import Output
    from flowforge.blocks.function import FunctionBlock
    from flowforge.blocks.http import HttpBlock
    from flowforge.blocks.llm import LLMBlock

    check = gen_reference.output_problems
    for name, cls in gen_reference.shipped_block_types().items():
        doc = gen_common.docstring_markdown(gen_common.dedent_doc(
            sys.modules[cls.__module__]))
        assert check(name, cls, doc) == [], name
    llm_doc = gen_common.docstring_markdown(gen_common.dedent_doc(
        sys.modules[LLMBlock.__module__]))
    # documented, but validation refuses it: `{{summarize.cost}}` would fail validate
    monkeypatch.setattr(LLMBlock, "outputs", {**LLMBlock.outputs,
                                              "body": Output("string", "A field never given.")})
    problems = check("llm", LLMBlock, llm_doc)      # for an empty `with:`, for the example
    assert problems and all("`llm`" in p and "`body`" in p and "refuses" in p for p in problems)
    # given (validation accepts `{{summarize.cost}}`), but not documented
    monkeypatch.undo()
    monkeypatch.setattr(LLMBlock, "outputs", {k: v for k, v in LLMBlock.outputs.items()
                                              if k != "cost"})
    problems = check("llm", LLMBlock, llm_doc)
    assert problems and all("`cost`" in p and "does not document" in p for p in problems)
    monkeypatch.undo()
    # an open output must say so
    monkeypatch.setattr(FunctionBlock, "more_outputs", "")
    problems = check("function", FunctionBlock, "")
    assert problems and all("`function`" in p and "more_outputs" in p for p in problems)
    monkeypatch.undo()
    # the prose may only read fields the block gives
    http_doc = gen_common.docstring_markdown(gen_common.dedent_doc(
        sys.modules[HttpBlock.__module__]))
    [problem] = check("http", HttpBlock, http_doc + "\nThen read `{{order.body}}`.\n")
    assert "`{{order.body}}`" in problem
    # and the generator stops, as `make docs` does
    monkeypatch.setattr(LLMBlock, "outputs", {k: v for k, v in LLMBlock.outputs.items()
                                              if k != "cost"})
    with pytest.raises(gen_reference.ManualDisagrees, match="`llm`.*`cost`"):
        gen_reference.generate(tmp_path / "reference")


def test_the_document_reference_covers_every_key_of_the_models_validate_uses(built):
    """Every key of the document's models has its row (type, default, its
    docstring) and an example section; the page's complete example validates."""
    import gen_document

    page = (built / "docs" / "reference" / "document.md").read_text()
    for name, cls in gen_document._models().items():
        for field_name, field in cls.model_fields.items():
            key = field.alias or field_name
            rows = re.findall(rf"^\| `{re.escape(key)}` \|.*$", page, re.M)
            assert any(" ".join(field.description.split())[:40] in row for row in rows), \
                f"{name}.{key}"
    for key in ("inputs", "variables", "defaults", "env", "memory", "budget", "concurrency",
                "triggers", "webhook", "metadata", "blocks[].after", "blocks[].on_error",
                "blocks[].timeout", "blocks[].retry", "blocks[].uses", "triggers[].cron",
                "budget.on_exceed", "retry.attempts"):
        assert f"### `{key}`" in page, key
    assert "X-Flowforge-Signature" in page and "worker pool" in page
    assert (built / "site" / "reference" / "document.html").is_file()


def test_a_document_key_without_description_or_example_or_refused_fails_the_build(
        monkeypatch, tmp_path):
    """The models are the page: a key left undescribed, an example the model
    refuses, or a complete example validate refuses stops the generator."""
    import gen_document

    from flowforge.workflow.model import BlockSpec, Workflow

    assert gen_document.document_problems() == []
    monkeypatch.setattr(Workflow.model_fields["concurrency"], "description", None)
    monkeypatch.setattr(BlockSpec.model_fields["timeout"], "examples", [-1])
    monkeypatch.setattr(gen_document, "COMPLETE_EXAMPLE",
                        gen_document.COMPLETE_EXAMPLE.replace("concurrency: 4",
                                                              "concurency: 4"))
    problems = gen_document.document_problems()
    assert any("`concurrency` of Workflow" in p and "no description" in p for p in problems)
    assert any("`timeout` of BlockSpec" in p and "-1" in p for p in problems)
    assert any("complete example" in p and "concurency" in p for p in problems)
    with pytest.raises(gen_reference.ManualDisagrees, match="`concurrency` of Workflow"):
        gen_reference.generate(tmp_path / "reference")


def test_each_block_page_lists_every_error_its_code_raises(built):
    """Every `raise SomethingError(` in a block module is a row of its page's
    Errors section (found here by a plain text scan, apart from the
    generator's parse), and the error reference links to each section."""
    reference = built / "docs" / "reference"
    errors_page = (reference / "errors.md").read_text()
    for name, cls in gen_reference.shipped_block_types().items():
        assert f"[`{name}`](blocks/{name}.md#errors)" in errors_page, name
        module = cls.__module__.rsplit(".", 1)[1]
        section = (reference / "blocks" / f"{name}.md").read_text().split("## Errors")[1]
        section = section.split("\n## ")[0]
        source = (ROOT / "src" / "flowforge" / "blocks" / f"{module}.py").read_text()
        for number, line in enumerate(source.splitlines(), 1):
            found = re.search(r"\braise (\w*Error|RunError)\(", line)
            if found and found.group(1) not in gen_block_errors.SIGNALS:   # internal misses
                assert f"`blocks/{module}.py:{number}`" in section, \
                    f"{name}: line {number} ({line.strip()}) is not on its page"
    assert "| `RunError` | loop '…': `…` asks for … but `max_iterations`" in \
        (reference / "blocks" / "loop.md").read_text()


def test_what_on_error_reads_is_what_the_error_pages_say():
    """The handler of a failed block reads `{{x.error}}`: the message alone for
    a flowforge error, `ValueError: ` before it for an error outside the tree,
    the refused field for a configuration a template made wrong, and the
    timeout's own words, as the block pages and the common table say."""
    import flowforge

    document = flowforge.load_text("""
version: 1
id: handled
inputs: {n: {type: integer, default: 3}, items: {type: array, default: [1, 2, 3]}}
blocks:
  - {id: each, type: loop, on_error: h1, with: {for_each: "{{input.n}}x"},
     blocks: [{id: s1, type: set, with: {v: 1}}]}
  - {id: h1, type: set, with: {seen: "{{each.error}}"}}
  - {id: capped, type: loop, on_error: h2, with: {for_each: "{{input.items}}", max_iterations: 2},
     blocks: [{id: s2, type: set, with: {v: 1}}]}
  - {id: h2, type: set, with: {seen: "{{capped.error}}"}}
  - {id: slow, type: wait, timeout: 0.1, on_error: h3, with: {seconds: 2}}
  - {id: h3, type: set, with: {seen: "{{slow.error}}"}}
  - {id: wrong, type: wait, on_error: h4, with: {seconds: "{{input.n}}x"}}
  - {id: h4, type: set, with: {seen: "{{wrong.error}}"}}
""")
    result = flowforge.run_sync(document, {}, storage=False)
    seen = {h: result.results[h]["seen"] for h in ("h1", "h2", "h3", "h4")}
    assert seen["h1"] == "ValueError: for_each must be a list, got str"
    assert seen["h2"].startswith("loop 'capped': `for_each` asks for 3 items but "
                                 "`max_iterations` is 2")
    assert seen["h3"] == "timed out after 0.1s"
    assert seen["h4"].startswith("invalid configuration after resolving templates: "
                                 "with.seconds: ")


OUTPUTS_RULES = {"rules": [
    {"system": "evaluation agent", "reply": {"accuracy": 8}},
    {"system": "routing agent", "reply": {"route": "done"}},
    {"system": "hallucination detector", "reply": {"score": 9, "reasoning": "supported"}},
    {"match": "summarize", "reply": {"summary": "short"}},
    {"match": "answer as json", "reply": {"answer": "yes"}},
], "default": "plain text"}

OUTPUTS_DOCUMENT = """
version: 1
id: outputs
inputs: {topic: {type: string, default: tents}}
defaults: {model: scripted/manual_outputs}
blocks:
  - {id: start, type: input}
  - {id: calc, type: set, with: {label: "about {{input.topic}}", n: 2}}
  - {id: free, type: llm, with: {prompt: "Say something about {topic}",
                                 inputs: {topic: "{{calc.label}}"}}}
  - {id: summary, type: llm, with: {prompt: "Summarize {text}", inputs: {text: "{{free.content}}"},
      output_schema: {type: object, properties: {summary: {type: string}}, required: [summary]}}}
  - {id: answer, type: agent, with: {prompt: "Answer as JSON: {{summary.summary}}",
      response_format: {type: object, properties: {answer: {type: string}},
                        required: [answer]}}}
  - {id: grade, type: evaluator, with: {content: "{{answer.answer}}",
      metrics: [{name: Accuracy, description: Correct, range: [0, 10]}]}}
  - {id: check, type: guardrail, with: {content: "{{answer.content}}", context: "{{free.content}}"}}
  - {id: fields, type: parser, with: {text: '{"a": 1}', schema: {type: object}}}
  - {id: mark, type: progress, with: {percent: 50, phase: half, result: "{{grade.accuracy}}"}}
  - {id: pause, type: wait, with: {seconds: 0.01}}
  - id: twice
    type: loop
    with: {times: 2}
    blocks: [{id: step, type: set, with: {i: "{{loop.index}}"}}]
  - id: each
    type: parallel
    with: {for_each: [1, 2]}
    blocks: [{id: item, type: set, with: {v: "{{loop.item}}"}}]
  - id: gate
    type: condition
    with: {cases: [{when: "grade.accuracy >= 5", goto: triage}], default: other}
  - id: triage
    type: router
    after: [gate, check, fields, mark, pause, twice, each, start]
    with: {prompt: "Pick done"}
  - {id: other, type: response, after: [gate], with: {message: other}}
  - {id: done, type: response, after: [triage], with: {message: "{{calc.label}}", data: {n: 1}}}
"""


def test_what_blocks_give_at_run_time_is_what_their_pages_say():
    """Run blocks of most types (a scripted model answering): every field an
    output has is one its page documents and validation accepts, and every
    field a fixed output's page documents is there (unless documented as
    absent or conditional)."""
    import flowforge
    from flowforge.providers.scripted import register_script, unregister_script

    register_script("manual_outputs", OUTPUTS_RULES)
    try:
        workflow = flowforge.load_text(OUTPUTS_DOCUMENT)
        result = flowforge.run_sync(workflow, {}, storage=False)
    finally:
        unregister_script("manual_outputs")
    assert result.status == "succeeded", result.blocks
    types = gen_reference.shipped_block_types()
    seen = set()
    for spec in workflow.doc.blocks:
        if spec.id == "other":
            continue                              # the branch not taken
        cls = types[spec.type]
        output = result.results[spec.id]
        accepted = cls.output_fields(spec, workflow.doc)
        if accepted is None:                      # open (a parser's object): its page says so
            assert "open" in cls.more_outputs, spec.type
        else:
            assert set(output) <= accepted, f"{spec.type} gives {set(output) - accepted}, " \
                                            f"which validation refuses"
        missing = {field for field, doc in cls.outputs.items() if field not in output
                   and not re.search(r"absent|only|when `", doc.description)}
        assert not missing, f"{spec.type} documents {missing}, which its output lacks"
        seen.add(spec.type)
    assert seen == {"input", "set", "llm", "agent", "evaluator", "guardrail", "parser",
                    "progress", "wait", "loop", "parallel", "condition", "router", "response"}


# -- the reference covers the code ---------------------------------------------------------

def test_every_block_type_and_field_has_its_entry(built):
    from gen_reference import shipped_block_types

    folder = built / "docs" / "reference" / "blocks"
    index = (folder / "index.md").read_text()
    sidebar = (built / "site" / "index.html").read_text()
    # every block module the package ships is in the manual
    modules = {path.stem for path in (ROOT / "src" / "flowforge" / "blocks").glob("*.py")
               if not path.stem.startswith("_") and path.stem not in ("base", "type_table")}
    assert {cls.__module__.rsplit(".", 1)[1] for cls in shipped_block_types().values()} == \
        modules
    for name, cls in shipped_block_types().items():
        assert f"[`{name}`]({name}.md)" in index, name
        assert f'href="reference/blocks/{name}.html"' in sidebar, name
        page = (folder / f"{name}.md").read_text()
        for field_name, field in cls.Config.model_fields.items():
            row = re.search(rf"^\| `{re.escape(field.alias or field_name)}` \|.*$", page, re.M)
            assert row, f"{name}: no row for field {field_name}"
            if field.description:
                assert " ".join(field.description.split())[:40] in row.group(0)
        assert (built / "site" / "reference" / "blocks" / f"{name}.html").is_file()
        for field, output in cls.outputs.items():                  # what it outputs
            row = re.search(rf"^\| `{re.escape(field)}` \|.*$", page.split("## Output")[1],
                            re.M)
            assert row and output.description[:40] in row.group(0), f"{name}: {field}"
        assert cls.outputs or cls.more_outputs in page, name
    agent = (folder / "agent.md").read_text()
    assert "`tool_called`" in agent and "`llm_delta`" in agent     # what it emits
    assert "| `toolCalls` | `{list: [{name, arguments" in agent
    assert "the output is open" in agent                           # without a schema


def test_every_command_and_option_has_its_entry(built):
    import typer.main

    from flowforge.cli.main import app

    page = (built / "docs" / "reference" / "cli.md").read_text()
    sections = dict(re.findall(r"^## `([^`]+)`\n(.*?)(?=^## |\Z)", page, re.M | re.S))

    def walk(command, path):
        assert path in sections, f"no entry for {path}"
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            names = param.opts if param.param_type_name == "option" else [param.name.upper()]
            for name in names:
                assert f"`{name}`" in sections[path], f"{path}: no entry for {name}"
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "flowforge")
    assert "flowforge run" in sections and "flowforge kb add" in sections


def test_every_route_has_its_entry(built):
    from flowforge.server.app import create_app

    page = (built / "docs" / "reference" / "http.md").read_text()
    paths = create_app().openapi()["paths"]
    assert len(paths) > 20
    for path, operations in paths.items():
        for method in operations:
            assert f"## `{method.upper()} {path}`" in page, f"{method.upper()} {path}"


def test_functions_errors_and_environment_have_their_entries(built):
    import flowforge.errors as errors
    from flowforge.workflow.expressions import FUNCTIONS
    from flowforge.workflow.graph import NAMESPACES

    reference = built / "docs" / "reference"
    expressions = (reference / "expressions.md").read_text()
    assert all(f"| `{name}` |" in expressions for name in FUNCTIONS)
    assert all(f"- `{name}`" in expressions for name in NAMESPACES)
    errors_page = (reference / "errors.md").read_text()
    assert all(f"`{name}` |" in errors_page for name in errors.__all__      # (after its anchor)
               if isinstance(getattr(errors, name), type)
               and issubclass(getattr(errors, name), Exception))
    assert "| 404 | `not_found` |" in errors_page
    assert "| `capability_denied` |" in errors_page and "| `idempotency_key_reused` |" in errors_page
    environment = (reference / "environment.md").read_text()
    for path in (ROOT / "src" / "flowforge").rglob("*.py"):
        for name in re.findall(r"os\.environ(?:\.get)?[(\[]\s*\"(FLOWFORGE_[A-Z0-9_]+)\"",
                               path.read_text()):
            assert f"| `{name}` |" in environment, f"{name} (read in {path.name})"


# -- offline ---------------------------------------------------------------------------------

class _Requests(html.parser.HTMLParser):
    """What a page makes the browser fetch by itself (not the links a reader may follow)."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed"):
            self.fetched.append(attrs.get("src") or "")
        elif tag == "link" and attrs.get("rel") not in ("canonical", "alternate"):
            self.fetched.append(attrs.get("href") or "")


def page_requests(text: str) -> list[str]:
    parser = _Requests()
    parser.feed(text)
    css = re.findall(r"url\(\s*['\"]?([^)'\"]+)", text) + re.findall(r"@import\s+['\"]([^'\"]+)",
                                                                       text)
    return [url for url in parser.fetched + css if url]


def test_the_built_site_fetches_nothing_from_another_host(built):
    site = built / "site"
    pages = list(site.rglob("*.html"))
    assert len(pages) > 30
    for path in pages + list(site.rglob("*.css")):
        external = [url for url in page_requests(path.read_text()) if re.match(r"(\w+:)?//", url)
                    and not url.startswith("data:")]
        assert external == [], f"{path.relative_to(site)} fetches {external}"
    assert not any("fonts.googleapis" in p.read_text() for p in pages)
    assert (site / "search" / "search_index.js").is_file()      # search works from file:// too


# -- the guides' code runs as written -------------------------------------------------------

MARKED = "<!-- checked by tests/test_readme.py -->"
FENCE = re.compile(rf"^({re.escape(MARKED)}\n)?```(\w*)([^\n]*)\n(.*?)^```$", re.M | re.S)
GUIDES = sorted(p for p in DOCS.rglob("*.md") if "reference" not in p.parts)
#: settings a page's blocks run with, where the page names them: the locked
#: database gives up after 1 s instead of waiting out the default 10 s
PAGE_ENV = {"guides/troubleshooting.md": {"FLOWFORGE_SQLITE_BUSY_SECONDS": "1"}}


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: str(p.relative_to(DOCS)))
def test_every_code_block_of_the_guides_runs(page, tmp_path, flowforge_bin):
    """A block titled with a file name is that file; a `bash` block runs in the
    page's scratch folder, in order; a `text title="output"` block after it
    lists lines its output must hold; a block marked as checked by
    tests/test_readme.py (moved there from the README, with checks of its own)
    must be one that file checks.  Any other block fails this test.  Its
    `flowforge` is the CLI forked from one process (tests/forked_cli.py); a
    setting the page names may be given a quicker value (PAGE_ENV)."""
    from tests.test_readme import claims

    text, page_env = page.read_text(), PAGE_ENV.get(str(page.relative_to(DOCS)), {})
    assert all(f"`{name}`" in text for name in page_env), page.name
    env = {**os.environ, "PATH": f"{flowforge_bin}:{Path(sys.executable).parent}:"
                                 f"{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200",
           "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'flowforge.db'}",
           "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{tmp_path / 'knowledge.db'}",
           "FLOWFORGE_SECRET_KEY_FILE": str(tmp_path / "secret.key"), **page_env}
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    last_output = None
    for marked, language, info, body in FENCE.findall(text):
        title = re.search(r'title="([^"]+)"', info)
        if marked:
            assert claims(str(page.relative_to(ROOT)), body), \
                f"{page.name}: a block marked as checked by tests/test_readme.py that no " \
                f"check there takes:\n{body}"
            last_output = None                    # an output block may not follow it
        elif language == "text" and title and title.group(1) == "output":
            assert last_output is not None, "an output block follows no command"
            for line in filter(str.strip, body.splitlines()):
                assert line in last_output, f"{line!r} not in:\n{last_output}"
        elif language == "bash":
            result = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env,
                                    capture_output=True, text=True, timeout=240)
            assert result.returncode == 0, f"{body}\n{result.stdout}\n{result.stderr}"
            last_output = result.stdout + result.stderr     # what the terminal shows
        elif title:                               # a file, perhaps in a folder
            (tmp_path / title.group(1)).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / title.group(1)).write_text(body)
        else:
            pytest.fail(f"{page.name}: a ```{language} block that no check covers:\n{body}")


def test_the_recipes_are_a_dozen_runnable_ones():
    """Each recipe (a `##` section) runs at least one command; the test above
    runs them all on scripted models."""
    page = (DOCS / "recipes" / "index.md").read_text()
    recipes = re.split(r"^## ", page, flags=re.M)[1:]
    assert len(recipes) >= 12
    for recipe in recipes:
        assert "```bash" in recipe, recipe.splitlines()[0]
    for title in ("Retry, then a fallback model", "A knowledge base from a folder",
                  "A loop over knowledge searches", "Call a workflow on a server"):
        assert f"## {title}\n" in page, title
    assert "fallback: [scripted/" in page            # the model list, not only on_error


def test_errors_and_troubleshooting_link_each_other_and_the_front_pages_say_where_to_run(
        built):
    """Every `**Error:**` line of a troubleshooting entry links to its class's
    row in the error reference, whose row links back to the entry; the home
    page and getting started say once where commands run from."""
    import flowforge.errors as errors

    entries = gen_reference.troubleshooting_entries()
    assert len({slug for found in entries.values() for _, slug in found}) >= 10
    page = (built / "docs" / "reference" / "errors.md").read_text()
    for name, found in entries.items():
        row = re.search(rf'^\| <a id="{name}"></a>`{name}` \|.*$', page, re.M)
        assert row, f"{name}: no row in the error reference"
        for _, slug in found:
            assert f"(../guides/troubleshooting.md#{slug})" in row.group(0), (name, slug)
    assert {"MissingCredentials", "BlockTimeout", "CapabilityDenied", "NotFound",
            "StorageError"} <= set(entries)
    assert all(f'<a id="{n}"></a>' in page for n in errors.__all__
               if isinstance(getattr(errors, n), type)
               and issubclass(getattr(errors, n), Exception))
    for front in ("index.md", "guides/getting-started.md"):
        text = (DOCS / front).read_text()
        assert text.count("Commands run from any folder") == 1, front
        assert "user data directory" in text and "checkout's root" in text, front


def test_no_page_says_the_same_thing_twice():
    """No run of 12 words of prose comes back on the same hand-written page
    (the RAG chat page opened with its introduction twice)."""
    for page in GUIDES:
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        words = re.findall(r"[\w'`-]+", prose.lower())
        runs = Counter(" ".join(words[i:i + 12]) for i in range(len(words) - 11))
        repeated = {run for run, count in runs.items() if count > 1}
        assert not repeated, f"{page.name} repeats: {sorted(repeated)[0]!r}"


# -- served at /manual/ --------------------------------------------------------------------

@pytest.fixture
async def client(built, monkeypatch):
    from flowforge.server import manual_pages
    from flowforge.server.app import create_app

    monkeypatch.setattr(manual_pages, "MANUAL", built / "site")
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


async def test_the_server_answers_the_manual_and_everything_it_loads(client, built):
    assert (await client.get("/manual")).headers["location"] == "/manual/"
    front = await client.get("/manual/")
    assert front.status_code == 200 and "flowforge manual" in front.text
    assert "connect-src 'self'" in front.headers["content-security-policy"]
    seen: set[str] = set()
    for page in ("index.html", "reference/cli.html", "reference/blocks/agent.html"):
        answer = await client.get(f"/manual/{page}")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
        for url in page_requests(answer.text):
            assert not re.match(r"(\w+:)?//", url), url
            target = httpx.URL(f"http://testserver/manual/{page}").join(url).path
            if target not in seen:
                seen.add(target)
                assert (await client.get(target)).status_code == 200, target
    assert any(path.endswith(".js") for path in seen) and any(p.endswith(".css") for p in seen)
    search = await client.get("/manual/search/search_index.json")
    assert search.status_code == 200 and "flowforge run" in search.text


async def test_unknown_pages_and_paths_outside_the_site_are_not_found(client):
    for path in ("/manual/no-such-page.html", "/manual/..%2F..%2Fapp.py",
                 "/manual/%2E%2E/%2E%2E/app.py"):
        answer = await client.get(path)
        assert answer.status_code == 404, path
        assert "def create_app" not in answer.text


async def test_an_installation_without_the_manual_says_how_to_build_it(tmp_path, monkeypatch):
    from flowforge.server import manual_pages
    from flowforge.server.app import create_app

    monkeypatch.setattr(manual_pages, "MANUAL", tmp_path / "nothing")
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        answer = await client.get("/manual/")
    assert answer.status_code == 404 and "make docs" in answer.text


async def test_in_a_browser_the_manual_and_its_search_stay_on_this_server(built, tmp_path,
                                                                         monkeypatch):
    """Debian's Chromium under the page's own Content-Security-Policy: every
    request the pages make, search included, goes to this server."""
    from playwright.async_api import async_playwright

    from flowforge.server import manual_pages
    from tests.server.conftest import start_server
    from tests.webapp.conftest import CHROMIUM, CHROMIUM_ARGS

    monkeypatch.setattr(manual_pages, "MANUAL", built / "site")
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    requests: list[str] = []
    problems: list[str] = []
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                       headless=True, args=CHROMIUM_ARGS)
            page = await browser.new_page()
            page.on("request", lambda request: requests.append(request.url))
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("console", lambda message: problems.append(message.text)
                    if message.type == "error" else None)
            await page.goto(f"{live.url}/manual/")
            await page.click("text=Getting started")
            await page.wait_for_url("**/guides/getting-started.html")
            await page.keyboard.press("s")                  # Material's search shortcut
            await page.keyboard.type("knowledge_base_search")
            await page.wait_for_selector(".md-search-result__item", timeout=15_000)
            results = await page.inner_text(".md-search-result")
            await browser.close()
    finally:
        await stop()
    assert "RAG chat" in results
    assert requests and all(url.startswith(live.url) for url in requests), \
        [url for url in requests if not url.startswith(live.url)]
    assert problems == []
