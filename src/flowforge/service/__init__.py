"""Run, resume, cancel and list: the service joins storage, engine and events."""

from flowforge.service.loading import (compile_document, load, load_text, register_workflow,
                                       resolve_workflow)
from flowforge.service.resuming import resume
from flowforge.service.runs import RunHandle, cancel_run, open_storage, run, run_sync, start_run

__all__ = ["RunHandle", "cancel_run", "compile_document", "load", "load_text", "open_storage",
           "register_workflow", "resolve_workflow", "resume", "run", "run_sync", "start_run"]
