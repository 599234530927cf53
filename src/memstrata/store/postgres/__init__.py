"""The PostgreSQL + pgvector backend: ``memstrata.open("postgresql://…")``."""
