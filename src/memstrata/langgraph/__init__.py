"""memstrata as LangGraph's long-term store (the ``langgraph`` extra).

    import memstrata
    from memstrata.langgraph import MemstrataStore

    store = MemstrataStore(memstrata.open("memory.db"))
    graph = builder.compile(store=store)

See docs/langgraph.md for how items map onto memstrata records.
"""

from memstrata.langgraph.embeddings import LangChainEmbedder
from memstrata.langgraph.store import MemstrataStore

__all__ = ["LangChainEmbedder", "MemstrataStore"]
