"""The document model: schema, loading, validation, templates, expressions."""

from flowforge.workflow.compile import compile_workflow
from flowforge.workflow.graph import (DATA, ERROR, NAMESPACES, BlockTypeInfo, CompiledWorkflow,
                                     Graph, Node)
from flowforge.workflow.loader import document_from_data, parse_text, read_document
from flowforge.workflow.model import BlockSpec, RetryPolicy, Workflow

__all__ = [
    "BlockSpec",
    "BlockTypeInfo",
    "CompiledWorkflow",
    "DATA",
    "ERROR",
    "Graph",
    "NAMESPACES",
    "Node",
    "RetryPolicy",
    "Workflow",
    "compile_workflow",
    "document_from_data",
    "parse_text",
    "read_document",
]
