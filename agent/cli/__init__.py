"""The ``memagent`` command line (click): one module per command group.

``main`` (the group, global options, logging), ``init`` (init, agents, templates),
``validate``, ``fs``, ``chat``, ``db``; ``common`` holds the lazily opened store and
the one-line error handling, ``config`` the settings and their precedence.
May import every layer below (core, tools, model, chat, ``vfs``, ``validators``);
nothing imports it. The console script is ``memagent.agent.cli.main:main``.
"""
