"""erstwhile as LangGraph's long-term store (the ``langgraph`` extra).

    import erstwhile
    from erstwhile.langgraph import ErstwhileStore

    store = ErstwhileStore(erstwhile.open("memory.db"))
    graph = builder.compile(store=store)

See docs/langgraph.md for how items map onto erstwhile records.
"""

from erstwhile.langgraph.embeddings import LangChainEmbedder
from erstwhile.langgraph.store import ErstwhileStore

__all__ = ["ErstwhileStore", "LangChainEmbedder"]
