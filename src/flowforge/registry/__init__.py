"""The block registry: typed, versioned, searchable blocks that workflows
use with `uses: <id>` and that the thinker finds, or writes and tests."""

from flowforge.registry.model import (CATEGORIES, EXECUTION_TYPES, BlockDefinition,
                                      BlockMetadata, Example, check_definition,
                                      definition_from_data, schema_problems, template_fields)
from flowforge.registry.registry import (LIBRARY_DIR, Registry, RegistryReads, SearchResult,
                                         get_registry, library_definitions, read_definition_file,
                                         set_registry, use_registry, view_registry_as)
from flowforge.registry.owned import registry_for
from flowforge.registry.search import BlockSearch, KnowledgeSearch, TextSearch
from flowforge.registry.store import BlockStore, block_store_from_url

__all__ = ["BlockDefinition", "BlockMetadata", "BlockSearch", "BlockStore", "CATEGORIES",
           "EXECUTION_TYPES", "Example", "KnowledgeSearch", "LIBRARY_DIR", "Registry",
           "RegistryReads", "SearchResult", "block_store_from_url", "TextSearch", "check_definition", "definition_from_data",
           "get_registry", "library_definitions", "read_definition_file", "schema_problems",
           "registry_for", "set_registry", "template_fields", "use_registry",
           "view_registry_as"]
