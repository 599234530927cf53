"""Extraction: one Extractor protocol, its providers, and entity resolution."""

from erstwhile.extraction.base import Extractor
from erstwhile.extraction.heuristic import HeuristicExtractor

__all__ = ["Extractor", "HeuristicExtractor"]
