"""memagent: a terminal agent whose memory is a versioned folder of files in a database.

The distribution maps the repository's top-level folders (vfs/, validators/, agent/,
skills_templates/) onto subpackages of this one import package, so that code and tests
import ``memagent.<part>`` and never collide with other distributions' top-level names.
"""

__version__ = "0.1.0"
