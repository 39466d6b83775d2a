"""Reports: one result object, many renderings (text table, dict, JSON, CSV, Markdown, HTML).

``StatusReport`` shows one model's metrics, ``CompareReport`` two or more models against a
reference, ``TableReport`` any table of raw rows (per-layer summaries). They take plain data
(names, backends, status mappings), never a profiler.
"""
from deeplite_like.reports.base import Report
from deeplite_like.reports.comparison import CompareReport
from deeplite_like.reports.status import StatusReport
from deeplite_like.reports.table import TableReport

__all__ = ["CompareReport", "Report", "StatusReport", "TableReport"]
