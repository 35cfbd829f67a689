"""Recall by meaning: embedders, the vectors of the files, and hybrid ranking.

- ``base``: the ``Embedder`` protocol, ``SearchMode``, ``EmbedderError``.
- ``registry``: ``MEMAGENT_EMBEDDER`` -> an embedder (``wordllama`` by default);
  ``providers/`` the implementations, the only modules importing an embedding SDK.
- ``chunks``: how a file is cut into embedded pieces.
- ``index``: the ``embeddings`` table kept in step off the write path (migration
  0009) and scored in process.
- ``hybrid``: lexical, semantic and fused ranking.

Nothing here imports ``memagent.agent``; the store is handed an embedder or builds
the configured one on first use.
"""
