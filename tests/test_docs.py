"""The documentation says what the project does: the README's commands are the ones CI proves, and its links resolve."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _section(markdown: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert match, f"no '## {heading}' section"
    return match.group(1)


def _bash_blocks(text: str) -> list[str]:
    return [block.strip() for block in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)]


def _commands(script: str) -> list[list[str]]:
    """Each simple command of a shell text (lines, `&&` chains), as words, with pip's `-q` dropped."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            words = [word for word in shlex.split(part) if word != "-q"]
            if words:
                commands.append(words)
    return commands


def _readme_commands() -> tuple[list[list[str]], list[list[str]]]:
    blocks = _bash_blocks(_section((REPO / "README.md").read_text(), "Two commands"))
    assert len(blocks) == 2, blocks
    install, test = (_commands(block) for block in blocks)
    return install, test


def _ci_commands() -> list[list[str]]:
    return _commands((REPO / ".ci" / "run").read_text())


def _extras(commands: list[list[str]]) -> set[str]:
    targets = [word for c in commands if "pip" in c[0] for word in c if word.startswith(".[")]
    assert len(targets) == 1, targets
    return set(targets[0][2:-1].split(","))


def test_ci_installs_exactly_what_the_readme_installs_and_runs_its_test_command() -> None:
    install, test = _readme_commands()
    ci = _ci_commands()
    readme_installs = [c for c in install if c[0] == "python3" or "pip" in c[0]]
    ci_installs = [c for c in ci if (c[0] == "python3" or "pip" in c[0]) and c[-2:] != ["--upgrade", "pip"]]
    assert [c for c in readme_installs if "pip" in c[0]], install  # the README installs something
    assert ci_installs == readme_installs, "README install and .ci/run differ"
    assert ["python3", "-m", "venv", ".venv"] in ci
    assert [".venv/bin/pip", "install", "torch==2.13.0"] in ci
    assert len(test) == 1 and test[0] in ci, (test, ci)
    assert ci.index(test[0]) > max(ci.index(c) for c in ci_installs)  # tests run after the install


GPU_ONLY_EXTRAS = {"cuda"}  # pycolmap's CUDA build, swapped in on a GPU node (README, "GPU node"); no test needs it


def test_the_readme_install_brings_every_extra_a_test_may_need() -> None:
    install, _ = _readme_commands()
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"]) - GPU_ONLY_EXTRAS
    assert _extras(install) == extras
    assert _extras(_ci_commands()) == extras


def _repo_files() -> list[Path]:
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    return [REPO / name for name in listed if (REPO / name).is_file()]


def test_nothing_refers_to_the_conventions_outside_the_repository() -> None:
    outside = "../" + "shared/CONVENTIONS.md"  # written in two parts, so this file does not match itself
    referring = []
    for path in _repo_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if outside in text or "`shared/" + "CONVENTIONS.md`" in text:
            referring.append(str(path.relative_to(REPO)))
    assert referring == []
    assert (REPO / "docs" / "CONVENTIONS.md").is_file()


def test_every_relative_link_in_the_documentation_resolves_to_a_file_in_the_repository() -> None:
    pages = [REPO / "README.md", REPO / "samples" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    links = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", page.read_text()):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a web address, or an anchor in the same page
            links.append((page, target.split("#", 1)[0]))
    assert any(target.endswith("CONVENTIONS.md") for _, target in links)
    for page, target in links:
        resolved = (page.parent / target).resolve()
        assert resolved.is_relative_to(REPO) and resolved.exists(), f"{page.relative_to(REPO)}: {target}"
