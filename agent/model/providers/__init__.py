"""The built-in model providers, one module each, listed in ``registry.BUILTIN``.

Each module exposes a module-level ``PROVIDER`` (or a ``PROVIDERS`` tuple) that
implements ``registry.Provider``. Invariant: importing a provider module imports
no provider SDK; the SDK is imported in ``build`` (the registry lists providers
for ``memagent models`` without paying for one).
"""
