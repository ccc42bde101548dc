# SPDX-License-Identifier: Apache-2.0
"""Every code block of README.md and docs/**/*.md runs, or is checked.

Each fenced block is one test case, named `<file>:<line>-<language>`:

- ```python blocks are executed in this process. The blocks of one file run
  in order in one namespace, as a reader goes down the page (a later block
  may use what an earlier one defined; running one block alone runs the
  ones before it first). Each file's blocks run in a temporary working
  directory of their own.
- ```bash / ```sh blocks: every command is checked first (the `--flags` of a
  command line of ours against its `--help`; make targets against the
  Makefile; pip options against `pip install --help`, extras against
  pyproject.toml), then the block runs in bash from the repository root.
  Only cheap commands run: a block with anything else (training, a build,
  an install) must say so with a marker on the line before it,

      <!-- not executed: why -->

  and is then checked but not run; each such block is reported in the
  warnings summary with its reason (`NotExecutedBlock`). A python block can
  carry the marker too (it is then compiled, not run).
- ```text blocks are output or layouts, not code. Any other language, a
  block without one, or a marker followed by no block fails.
"""

import ast
import atexit
import contextlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
LANGUAGES = {"python": "python", "bash": "bash", "sh": "bash", "text": "text"}
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"^<!--\s*not executed:\s*(.+?)\s*-->[ \t]*$", re.M | re.S)
HELP_ARGS = {"--help", "-h", "--helpshort", "--helpfull"}
# Commands an unmarked bash block may run: they read, print and change nothing.
CHEAP = {"echo", "ls", "cat", "head", "tail", "true", "printf"}
PYTHONS = {"python", "python3", ".venv/bin/python", ".venv/bin/python3"}
SEPARATORS = {"\n", ";", "&&", "||", "|", "&"}


class NotExecutedBlock(UserWarning):
    """A documentation block marked `<!-- not executed: ... -->`."""


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    not_executed: str | None  # the marker's reason
    index: int = 0  # among the file's python blocks

    @property
    def name(self):
        suffix = "-not-executed" if self.not_executed else ""
        return f"{self.path.relative_to(ROOT)}:{self.line}-{self.language}{suffix}"


def read_blocks(path):
    """The fenced blocks of a markdown file, with their markers."""
    text = path.read_text()
    blocks, problems, used_markers = [], [], set()
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        tag = match.group(1)
        if tag not in LANGUAGES:
            problems.append(
                f"{path.relative_to(ROOT)}:{line}: a block tagged {tag!r}; "
                f"tag each block as one of {sorted(LANGUAGES)}"
            )
            continue
        before = text[: match.start()].rstrip()
        marker = None
        last = before.rsplit("\n", 1)[-1]
        found = MARKER.search(last)
        if found:
            marker = " ".join(found.group(1).split())
            used_markers.add(len(before) - len(last))
        blocks.append(Block(path, line, LANGUAGES[tag], match.group(2), marker))
    for found in MARKER.finditer(text):
        if found.start() not in used_markers:
            line = text.count("\n", 0, found.start()) + 1
            problems.append(
                f"{path.relative_to(ROOT)}:{line}: a 'not executed' marker "
                "with no code block right after it"
            )
    python = [b for b in blocks if b.language == "python"]
    for i, block in enumerate(python):
        block.index = i
    return blocks, problems


BLOCKS, PROBLEMS = [], []
for _document in DOCUMENTS:
    _blocks, _problems = read_blocks(_document)
    BLOCKS += [b for b in _blocks if b.language != "text"]
    PROBLEMS += _problems


def test_blocks_are_tagged_and_marked_well():
    assert not PROBLEMS, "\n".join(PROBLEMS)


def test_every_document_is_in_the_site():
    """Each page under docs/ is in mkdocs.yml's nav (else the site hides it)."""
    config = (ROOT / "mkdocs.yml").read_text()
    nav = set(re.findall(r":\s*(\S+\.md)\s*$", config, re.M))
    pages = {str(p.relative_to(ROOT / "docs")) for p in DOCUMENTS[1:]}
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "mkdocs.yml's nav names missing pages"


# Python blocks ---------------------------------------------------------------


@dataclass
class Page:
    """The shared namespace of one file's python blocks."""

    namespace: dict = field(default_factory=lambda: {"__name__": "__docs__"})
    workdir: str = field(default_factory=lambda: _scratch_folder())
    done: int = 0
    failed: str | None = None


_PAGES = {}


def _scratch_folder():
    """A temporary folder, removed when the test process ends."""
    folder = tempfile.mkdtemp(prefix="docs-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _page(path):
    if path not in _PAGES:
        import keras

        # Each page starts from Keras' defaults, as a reader's session would.
        keras.mixed_precision.set_global_policy("float32")
        keras.backend.clear_session()
        _PAGES[path] = Page()
    return _PAGES[path]


def _python_blocks(path):
    return [b for b in BLOCKS if b.path == path and b.language == "python"]


@contextlib.contextmanager
def _working_directory(path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _exec(block, page):
    # Line numbers in tracebacks are the markdown file's.
    source = "\n" * block.line + block.code
    code = compile(source, str(block.path.relative_to(ROOT)), "exec")
    with _working_directory(page.workdir):
        exec(code, page.namespace)


def run_python(block):
    if block.not_executed:
        source = "\n" * block.line + block.code
        compile(source, str(block.path.relative_to(ROOT)), "exec")
        return
    page = _page(block.path)
    if page.failed:
        pytest.fail(f"an earlier block of this page failed: {page.failed}")
    # The blocks before this one first, when it runs without them (-k).
    for each in [*_python_blocks(block.path)[page.done : block.index], block]:
        if not each.not_executed:
            try:
                _exec(each, page)
            except BaseException:
                page.failed = each.name
                raise
        page.done = each.index + 1


# Bash blocks -----------------------------------------------------------------


def strip_comments(script):
    """The script without its comments (a `#` starting a word, outside quotes)."""
    out, quote, i = [], None, 0
    while i < len(script):
        c = script[i]
        if quote:
            if c == "\\" and quote == '"':
                out.append(script[i : i + 2])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c == "\\":
            out.append(script[i : i + 2])
            i += 2
            continue
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or script[i - 1] in " \t\n;&|("):
            while i < len(script) and script[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def commands(script):
    """The simple commands of a bash script, each a list of words."""
    lexer = shlex.shlex(
        strip_comments(script.replace("\\\n", " ")),
        posix=True,
        punctuation_chars="();<>|&\n",
    )
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    found, words = [], []
    for token in lexer:
        if token in SEPARATORS or set(token) <= set("\n;&|"):
            if words:
                found.append(words)
            words = []
        else:
            words.append(token)
    if words:
        found.append(words)
    return found


def _scripts():
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    scripts = {
        name: target.split(":")[0] for name, target in project["scripts"].items()
    }
    return scripts, set(project["optional-dependencies"])


SCRIPTS, EXTRAS = _scripts()


def program(words):
    """(kind, name, arguments) of a command after its VAR=value prefixes:
    kind is "module" for `python -m M` and our console scripts, else "program"."""
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
        words = words[1:]
    if not words:
        return "assignment", None, []
    head, rest = words[0], words[1:]
    if head in SCRIPTS or head.startswith(".venv/bin/") and head[10:] in SCRIPTS:
        return "module", SCRIPTS[head.rsplit("/", 1)[-1]], rest
    if head in PYTHONS and rest[:1] == ["-m"] and len(rest) > 1:
        return "module", rest[1], rest[2:]
    return "program", head, rest


_HELP = {}


def help_flags(module):
    """{flag: is boolean} from a command line's --help (run once per module)."""
    if module not in _HELP:
        result = subprocess.run(
            [sys.executable, "-m", module, "--help"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert result.returncode == 0, (
            f"{module} --help failed:\n{result.stdout}\n{result.stderr}"
        )
        _HELP[module] = result.stdout
    names = {}
    for name, rest in re.findall(r"^\s+--(\w+):(.*)$", _HELP[module], re.M):
        names[name] = rest.rstrip().endswith(("(default: False)", "(default: True)"))
    assert names, f"no flags found in the --help of {module}"
    return names


def check_module_flags(module, arguments, where):
    """Every --flag of a command line of ours is one of its flags."""
    if module == "pip":
        return check_pip(arguments, where)
    nested = []
    if "--" in arguments:  # the launcher: its command after `--`
        cut = arguments.index("--")
        arguments, nested = arguments[:cut], arguments[cut + 1 :]
    known = None
    for word in arguments:
        if not word.startswith("--") or word in HELP_ARGS:
            continue
        if known is None:
            known = help_flags(module)
        name = word[2:].split("=", 1)[0]
        boolean_no = name.startswith("no") and known.get(name[2:], False)
        assert name in known or boolean_no, (
            f"{where}: {module} has no flag --{name} (its --help lists {sorted(known)})"
        )
    if nested:
        check_command(nested, where)


_PIP_HELP = []


def check_pip(arguments, where):
    """pip options exist; `.[extra,...]` names extras of pyproject.toml."""
    if not _PIP_HELP:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--help"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        _PIP_HELP.append(set(re.findall(r"(?<![\w-])--[a-z][\w-]*", result.stdout)))
    for word in arguments:
        if word.startswith("--"):
            option = word.split("=", 1)[0]
            assert option in _PIP_HELP[0], f"{where}: pip install has no {option}"
        for extras in re.findall(r"^[^\[]*\[([^\]]*)\]$", word):
            unknown = set(extras.split(",")) - EXTRAS
            assert not unknown, f"{where}: no extras {unknown} in pyproject.toml"


def make_targets():
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.M))


def check_command(words, where):
    kind, name, arguments = program(words)
    if kind == "module":
        check_module_flags(name, arguments, where)
    elif name in ("pip", "pip3") or name and name.endswith("/pip"):
        check_pip(arguments[1:], where)
    elif name == "make":
        targets = [a for a in arguments if not a.startswith("-") and "=" not in a]
        missing = set(targets) - make_targets()
        assert not missing, f"{where}: the Makefile has no target {missing}"


def is_cheap(words):
    kind, name, arguments = program(words)
    if kind == "assignment" or name in CHEAP:
        return True
    if kind == "module":
        return bool(HELP_ARGS & set(arguments)) and "--" not in arguments
    return name in PYTHONS and arguments[:1] == ["--version"]


def run_bash(block):
    where = block.name
    found = commands(block.code)
    assert found, f"{where}: no command in the block"
    for words in found:
        check_command(words, where)
    if block.not_executed:
        return
    costly = [" ".join(w) for w in found if not is_cheap(w)]
    assert not costly, (
        f"{where}: this test runs only cheap commands (--help, echo, ...), not "
        f"{costly}; put '<!-- not executed: <why> -->' on the line before the "
        "block, or make it cheap"
    )
    process, out, err = _STARTED.pop(block.name, None) or _start_bash(block)
    returncode = process.wait(timeout=300)
    stdout, stderr = (f.seek(0) or f.read() for f in (out, err))
    out.close()
    err.close()
    assert returncode == 0, f"{where} exited with {returncode}:\n{stdout}\n{stderr}"
    # A lone `--help` of one of our command lines: its flags for later checks.
    if len(found) == 1:
        kind, name, arguments = program(found[0])
        if kind == "module" and arguments in (["--help"], ["-h"]):
            _HELP.setdefault(name, stdout)


_STARTED = {}  # block name -> its bash process, started ahead of its test


def _start_bash(block):
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    command = ["bash", "-euo", "pipefail", "-c", block.code]
    process = subprocess.Popen(command, stdout=out, stderr=err, cwd=ROOT, env=env)
    return process, out, err


@pytest.fixture(scope="session")
def bash_ahead(request):
    """Starts the selected bash blocks that run (all cheap) at once, in the
    background: each `--help` imports TensorFlow (seconds), which overlaps
    with the python blocks. Not under xdist, whose workers would each start
    them all."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        for item in request.session.items:
            block = getattr(getattr(item, "callspec", None), "params", {}).get("block")
            if (
                block
                and block.language == "bash"
                and not block.not_executed
                and commands(block.code)
                and all(is_cheap(words) for words in commands(block.code))
            ):
                _STARTED[block.name] = _start_bash(block)
    yield
    for process, out, err in _STARTED.values():  # blocks whose test did not run
        process.kill()
        process.wait()
        out.close()
        err.close()


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_block(block, bash_ahead):
    if block.not_executed:
        warnings.warn(
            NotExecutedBlock(f"{block.name}: not executed: {block.not_executed}"),
            stacklevel=1,
        )
    if block.language == "python":
        run_python(block)
    else:
        run_bash(block)


# The checker itself ------------------------------------------------------------


def test_commands_split_like_bash():
    script = (
        "# a comment with a quote: it's\n"
        "D=x/y  # trailing\n"
        "python -m a.b --f $D/t.csv \\\n"
        "    --g 1 && make build; echo 'a # b'\n"
        'export C=\'{"k": 1,\n   "j": 2}\'\n'
    )
    assert commands(script) == [
        ["D=x/y"],
        ["python", "-m", "a.b", "--f", "$D/t.csv", "--g", "1"],
        ["make", "build"],
        ["echo", "a # b"],
        ["export", 'C={"k": 1,\n   "j": 2}'],
    ]


def test_flag_checks_fail_on_unknown_flags():
    _HELP["fake.cli"] = (
        "  --epochs: Epochs. (default: 5)\n  --quiet: Quiet. (default: False)\n"
    )
    check_module_flags("fake.cli", ["train", "--epochs", "3", "--noquiet"], "x")
    with pytest.raises(AssertionError, match="no flag --epoch"):
        check_module_flags("fake.cli", ["--epoch=3"], "x")
    with pytest.raises(AssertionError, match="no flag --noepochs"):
        check_module_flags("fake.cli", ["--noepochs"], "x")
    with pytest.raises(AssertionError, match="no target"):
        check_command(["make", "no-such-target"], "x")
    with pytest.raises(AssertionError, match="no extras"):
        check_command(["pip", "install", ".[no_such_extra]"], "x")


def test_markers_are_read(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not executed: too slow -->\n\n```bash\nmake demo\n```\n\n"
        "```python\nx = 1\n```\n\n<!-- not executed: dangling -->\n\n"
        "```yaml\na: 1\n```\n"
    )
    blocks, problems = read_blocks(page)
    assert [(b.language, b.not_executed) for b in blocks] == [
        ("bash", "too slow"),
        ("python", None),
    ]
    assert len(problems) == 2
    assert "'yaml'" in problems[0] and "no code block" in problems[1]


# The API reference and the benchmark plots ---------------------------------------


def _public_names(module_file):
    tree = ast.parse(module_file.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "__all__" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{module_file} has no __all__")


def test_api_reference_covers_the_public_api():
    pages = sorted((ROOT / "docs" / "api").glob("*.md"))
    documented = set()
    for page in pages:
        documented |= set(re.findall(r"^::: (\S+)", page.read_text(), re.M))
    package = ROOT / "tf_transducer"
    top = _public_names(package / "__init__.py")
    modules = [
        n for n in top if (package / n).is_dir() or (package / f"{n}.py").exists()
    ]
    for name in modules + ["training", "cli"]:
        assert f"tf_transducer.{name}" in documented, f"no API page for {name}"
    overview = (ROOT / "docs" / "api" / "index.md").read_text()
    missing = [n for n in top if n not in modules and f"`{n}`" not in overview]
    assert not missing, f"docs/api/index.md does not list {missing}"


def test_benchmark_plots_read_their_tables():
    spec = importlib.util.spec_from_file_location(
        "plot_benchmarks", ROOT / "benchmarks" / "plot_benchmarks.py"
    )
    plots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plots)
    data = plots.data(plots.read_tables())
    assert all(data.values()), {k: len(v) for k, v in data.items()}
    text = (ROOT / "benchmarks" / "BENCHMARKS.md").read_text()
    for name in ("rnnt_loss", "mutual_information", "half_logits", "lattice_vs_last"):
        assert (ROOT / "docs" / "img" / f"{name}.png").is_file(), name
        assert f"(../docs/img/{name}.png)" in text, f"BENCHMARKS.md lacks {name}.png"
