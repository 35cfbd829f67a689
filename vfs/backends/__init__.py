"""Database backends: the dialect-specific parts of the store (being built; see ARCHITECTURE.md).

``postgres_roles``: database roles per user and row-level security grants (Postgres only).
"""
