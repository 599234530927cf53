"""Extraction: one Extractor protocol, its providers, and entity resolution."""

from memstrata.extraction.base import Extractor
from memstrata.extraction.heuristic import HeuristicExtractor

__all__ = ["Extractor", "HeuristicExtractor"]
