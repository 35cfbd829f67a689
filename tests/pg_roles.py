"""Login roles for tests of Postgres row-level security and tenant isolation.

``role_maker(owner_url)`` yields ``new_role(label)``, which creates a uniquely named login
role (made by ``db role create``'s code, so memagent manages it) and returns its name; every
role made is dropped afterwards. ``role_url`` is the owner's URL as that role.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from memagent.vfs.backends import postgres_roles as roles

PASSWORD = "correct horse battery staple"


def role_url(owner_url: str, role: str) -> str:
    return make_url(owner_url).set(username=role, password=PASSWORD).render_as_string(hide_password=False)


@contextmanager
def role_maker(owner_url: str) -> Iterator[Callable[[str], str]]:
    engine = create_engine(owner_url)
    made: list[str] = []

    def new_role(label: str) -> str:
        name = f"t_{label}_{uuid.uuid4().hex[:8]}"
        assert roles.create_role(engine, name, PASSWORD)
        made.append(name)
        return name

    try:
        yield new_role
    finally:
        for name in made:
            roles.drop_role(engine, name)
        engine.dispose()
