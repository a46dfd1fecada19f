"""`POST /api/import`: a workflow file of another system as a flowforge document.

The web app's "New workflow -> import a file" sends the file's name and text;
the answer is the converted document (as data and as YAML text), what each
node became (the report) and the format it was read as.  Nothing is saved:
the editor shows the document and saves it through the workflow routes,
where it is checked again.  The steps are `flowforge import`'s
(`service.importing`), and the document passes this user's policy gate
before it is shown as importable:

    200 {"document": {...}, "yaml": "...", "report": {...}, "format": "agent"}
    422 {"error": {...}, "detail": "...", "report": {...}}      refused (--partial)
    422 {"error": {...}, "detail": "...", "report": null}       broken, located
    403 the document reaches what this user was not granted (as a save says)

The body is bounded by the server's request limit like every body.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from flowforge.errors import CapabilityDenied
from flowforge.server.auth import CurrentUser
from flowforge.server.errors import error_body
from flowforge.service.compiling import BIG_BODY

__all__ = ["router", "ImportRequest", "import_outcome"]

router = APIRouter(tags=["workflows"])


class ImportRequest(BaseModel):
    """A foreign workflow file to convert."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    filename: str = Field(min_length=1, max_length=255, examples=["support.dify.yml"])
    """The file's name as the user chose it: messages name it."""
    text: str = Field(examples=['{"variables": {}, "promptChain": []}'])
    """The file's text: JSON or YAML."""
    partial: bool = False
    """Import even when some nodes have no counterpart: they stay in the
    document as blocks that fail clearly if a run reaches them."""
    format: str | None = Field(None, max_length=64, examples=["agent"])
    """The file's format by name (`pipeline`, `agent`, ...); null: detected."""


def import_outcome(text: str, filename: str, partial: bool, format: str | None, policy: Any,
                   model_override: str | None, chain_base_url: str | None, max_blocks: int
                   ) -> tuple[str, Any]:
    """The import as a pool job (`service.compiling`): `("ok", answer)`,
    `("refused", (detail, report))`, `("broken", (detail, problems))` or
    `("denied", (problems, subject))`: plain data, which crosses processes."""
    from flowforge.errors import ValidationFailed, WorkflowError
    from flowforge.formats import FormatError, ImportRefused
    from flowforge.service.compiling import check_block_count
    from flowforge.service.importing import check_imported, document_yaml, import_text
    from flowforge.workflow.policy import check_policy

    try:
        imported = import_text(text, filename, partial=partial, format=format,
                               base_url=chain_base_url)
        check_block_count(imported.document, max_blocks)
        compiled = check_imported(imported, filename)
        if policy is not None:
            check_policy(compiled, policy, model_override=model_override)
    except ImportRefused as exc:
        return "refused", (str(exc), exc.imported.report.as_dict())
    except CapabilityDenied as exc:
        return "denied", (exc.problems, exc.subject)
    except ValidationFailed as exc:
        return "broken", (str(exc), [{"where": p.where, "message": p.message}
                                     for p in exc.problems])
    except (FormatError, WorkflowError) as exc:
        return "broken", (str(exc), [{"where": getattr(exc, "where", ""),
                                      "message": getattr(exc, "message", str(exc))}])
    return "ok", {"document": imported.document, "yaml": document_yaml(imported.document),
                  "report": imported.report.as_dict(), "format": imported.report.format}


@router.post("/api/import", summary="Convert a workflow file of another system (Dify, n8n, "
                                    "Langflow, Flowise, Pipeline JSON, Agent JSON) into a "
                                    "flowforge document, without saving it",
             responses={422: {"description": "Refused (nodes without a counterpart, and no "
                                             "`partial`): `detail` and `report`; or a broken "
                                             "file: `detail`, located, and `problems`"},
                        403: {"description": "The document reaches what this user was not "
                                             "granted"}})
async def import_file(request: Request, body: ImportRequest, user: CurrentUser) -> Any:
    """Detect the file's format (or take `format`), convert it, and check the
    result as a save would (it must validate, and pass this user's grants).
    Answers the document, its YAML text, the report (per node what it became,
    the nodes without a counterpart, settings dropped, knowledge bases to
    create) and the format's name; saves nothing."""
    live = request.app.state.live
    policy = await live.policy(user)
    kind, value = await live.workflows.compiler.run(
        import_outcome, body.text, body.filename, body.partial, body.format, policy,
        live.settings.model, live.settings.chain_base_url, live.settings.max_document_blocks,
        big=len(body.text) >= BIG_BODY)
    if kind == "ok":
        return value
    if kind == "denied":
        problems, subject = value
        raise CapabilityDenied(problems, subject)
    if kind == "refused":
        detail, report = value
        return JSONResponse({**error_body(422, detail, "import_refused"), "detail": detail,
                             "report": report}, status_code=422)
    detail, problems = value
    return JSONResponse({**error_body(422, detail, "invalid_import", problems),
                         "detail": detail, "problems": problems, "report": None},
                        status_code=422)
