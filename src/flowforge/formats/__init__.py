"""Foreign workflow documents in: one module per format, one interface.

`flowforge.formats.base` is the interface (a `Format` turns data into an
`Imported`: a document and a report); `flowforge.formats.room` picks the
format and applies the import policy.  Each other module is one format.
"""

from flowforge.formats.base import Format, FormatError, Imported, ImportRefused, ImportReport, \
    NodeReport
from flowforge.formats.room import FORMATS, detect, formats, import_data, import_file, \
    parse_foreign, read_foreign

__all__ = ["Format", "FormatError", "Imported", "ImportRefused", "ImportReport", "NodeReport",
           "FORMATS", "detect", "formats", "import_data", "import_file", "parse_foreign",
           "read_foreign"]
