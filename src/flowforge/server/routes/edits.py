"""`PATCH /api/workflows/{id}`: what the canvas and the block forms send.

A save from the editor must not cost the author their comments, key order
or layout: the edits are applied to the stored text (workflow/text_edits.py)
so only the lines they touch change, and the result is saved as a new
version exactly like a PUT of that text: validated, checked against the
saver's grants, refused whole (nothing stored) with every problem at its
line of the edited text."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from flowforge.errors import WorkflowError
from flowforge.server.auth import CurrentUser
from flowforge.server.document_view import check_text_view
from flowforge.server.errors import ApiError
from flowforge.server.routes.workflows import owner_of
from flowforge.server.views import workflow_view
from flowforge.service.compiling import BIG_BODY
from flowforge.workflow.loader import parse_text
from flowforge.workflow.text_edits import Edit, apply_edits

__all__ = ["router", "WorkflowEdits"]

router = APIRouter(prefix="/api/workflows", tags=["workflows"])


class WorkflowEdits(BaseModel):
    """Edits to a stored workflow's text, applied in order, saved as one new version."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    edits: list[Edit] = Field(min_length=1, max_length=500)
    """`set`, `unset`, `add_block`, `remove_block`, `add_after`, `remove_after`, `move`."""
    base_version: int | None = Field(None, ge=1, le=2**31 - 1)
    """The version the editor shows: when another save came since, the edits are
    refused (409) instead of being applied to a text the author has not seen."""


@router.patch("/{workflow_id}", summary="Edit a workflow in place: only the lines the edits "
                                        "touch change; saved as a new version")
async def edit_workflow(request: Request, workflow_id: str, body: WorkflowEdits,
                        user: CurrentUser, owner: str | None = None) -> dict[str, Any]:
    live = request.app.state.live
    owner_id = owner_of(user, owner)
    row = await live.workflows.get(owner_id, workflow_id)
    if body.base_version is not None and body.base_version != row["version"]:
        raise ApiError(409, f"workflow '{workflow_id}' is at version {row['version']}, not "
                            f"{body.base_version}: reload it and edit the latest version")
    text = row.get("source") or _written(row["document"])
    edited = apply_edits(text, body.edits)
    problems, *_ = await live.workflows.compiler.run(
        check_text_view, edited, await live.policy(user), live.settings.model,
        live.settings.chain_base_url, live.settings.max_document_blocks,
        big=len(edited) >= BIG_BODY)
    if problems:
        raise ApiError(422, f"{len(problems)} problem(s) in the edited workflow: nothing was "
                            f"saved", code="invalid_workflow", details=problems)
    try:
        document = parse_text(edited, "<edited document>")
    except WorkflowError as exc:     # check_text parsed it already; kept for a clear answer
        raise ApiError(422, str(exc), code="invalid_workflow") from None
    webhook = document.get("webhook") if isinstance(document, dict) else None
    if isinstance(webhook, str) and webhook:
        await live.check_webhook(webhook, where="webhook (in the document)")
    saved = await live.workflows.save(owner_id, document, expected_id=workflow_id,
                                      policy=await live.policy(user),
                                      model_override=live.settings.model, source=edited)
    return workflow_view(saved)


def _written(document: dict[str, Any]) -> str:
    """YAML for a version saved without its text (before texts were kept)."""
    import yaml

    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=4096)
