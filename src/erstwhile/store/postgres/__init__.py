"""The PostgreSQL + pgvector backend: ``erstwhile.open("postgresql://…")``."""
