"""Durable jobs. The database is the cursor: a job re-run after a crash picks up
exactly the work that is still missing and redoes nothing."""
