"""skills-ref (the Agent Skills reference validator, pinned in pyproject's dev extra) accepts
every exported skill in every format, and the round trip stays lossless (issue 28, finding 3).

The skill under test came from Claude Code with ``version``, ``when_to_use`` and
``argument-hint``: no target reads those from anywhere the spec allows, so they stay under
``metadata``; ``memagent import`` of the export gives the stored file back exactly (through
the export manifest).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import err, run
from tests.interop import agent_memory as mem

AGENTSKILLS = Path(sys.executable).with_name("agentskills")
SKILL_DIRS = {"claude-code": ".claude/skills", "codex": ".agents/skills", "opencode": ".opencode/skills",
              "deepagents": "skills"}


@pytest.mark.parametrize("fmt", list(SKILL_DIRS))
def test_every_exported_skill_passes_skills_ref_and_comes_back(fmt: str, tmp_path: Path) -> None:
    assert shutil.which(str(AGENTSKILLS)), "skills-ref is in the dev extra: pip install -e '.[dev]'"
    project = tmp_path / "project"
    mem.export(fmt, project, agent=f"skills-{fmt.replace('-', '')}")
    folders = sorted(p.parent for p in (project / SKILL_DIRS[fmt]).rglob("SKILL.md"))
    assert [f.name for f in folders] == sorted(mem.SKILLS)
    for folder in folders:
        done = subprocess.run([str(AGENTSKILLS), "validate", str(folder)], capture_output=True, text=True,
                              check=False, timeout=60)
        assert done.returncode == 0, (folder.name, done.stdout, done.stderr)
    wild = (project / SKILL_DIRS[fmt] / "pdf-forms/SKILL.md").read_text()
    meta = yaml.safe_load(wild.split("---\n")[1])
    assert meta["metadata"] == {"version": "1.2", "when_to_use": "When a form arrives", "argument-hint": "[file]"}

    back = f"back{fmt.replace('-', '')}"
    done_import = run("import", str(project), "--as", back, "--yes", timeout=120)
    assert done_import.returncode == 0, err(done_import)
    assert mem.stored(back) == mem.memory()
