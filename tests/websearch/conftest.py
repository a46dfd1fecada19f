"""The knowledge fixture of the applications' tests (policies and the offline web)."""

from tests.apps.conftest import knowledge, knowledge_path  # noqa: F401
