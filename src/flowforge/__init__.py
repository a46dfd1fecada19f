"""flowforge: run LLM agent workflows, offline by default.

    import flowforge

    @flowforge.function("double")
    def double(n: int) -> dict:
        return {"value": n * 2}

    workflow = flowforge.load("examples/branch_join.yaml")
    result = flowforge.run_sync(workflow, {"n": 3}, user="alice")
    print(result.status, result.outputs)
"""

from flowforge.engine.events import EventBus
from flowforge.engine.result import BlockRecord, RunResult
from flowforge.errors import (BlockError, BlockTimeout, CapabilityDenied, FlowforgeError,
                              InputError, InvalidValue, MissingCredentials, NotFound, Problem,
                              ProviderError, RunError, StorageError, ToolError, ValidationFailed,
                              WorkflowError)
from flowforge.service import chat
from flowforge.service.loading import load, load_text, register_workflow
from flowforge.service.resuming import resume
from flowforge.service.runs import RunHandle, cancel_run, run, run_sync, start_run
from flowforge.tools.functions import function
from flowforge.workflow.graph import CompiledWorkflow
from flowforge.workflow.model import Workflow
from flowforge.workflow.policy import CAPABILITIES, Policy

__version__ = "0.1.0"

__all__ = [
    "BlockError",
    "BlockRecord",
    "BlockTimeout",
    "CAPABILITIES",
    "CapabilityDenied",
    "CompiledWorkflow",
    "EventBus",
    "FlowforgeError",
    "InputError",
    "InvalidValue",
    "MissingCredentials",
    "NotFound",
    "Policy",
    "Problem",
    "ProviderError",
    "RunError",
    "RunHandle",
    "RunResult",
    "StorageError",
    "ToolError",
    "ValidationFailed",
    "Workflow",
    "WorkflowError",
    "cancel_run",
    "chat",
    "function",
    "load",
    "load_text",
    "register_workflow",
    "resume",
    "run",
    "run_sync",
    "start_run",
]
