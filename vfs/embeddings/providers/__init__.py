"""Embedder implementations: the only vfs modules that import an embedding SDK
(``wordllama``, ``fastembed``, ``openai``), each on first use, never at import."""
