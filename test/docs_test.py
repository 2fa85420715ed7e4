#!/usr/bin/env python3
"""Runs the commands that README.md and docs/*.md show, and checks that their output is still
what the page shows. Python 3, standard library only.

  python3 test/docs_test.py [--bin PATH] [FILE.md ...]   # default: README.md, then docs/*.md
  python3 test/docs_test.py --show-output FILE.md        # also print what each command printed
  python3 test/docs_test.py --self-test                  # the parser, the matcher, the runner

What runs
  - Only fenced blocks marked ```console. Blocks marked ```sh, plain ``` and every other kind
    are illustrations (a real GPU, a real Kubernetes cluster, files of one's own) and are not
    run.
  - In a console block a line that starts with "$ " is a command; a command whose line ends in
    a backslash goes on with the next line. The lines after a command, up to the next "$ " line
    or the end of the block, are its expected output (stdout and stderr together). A command
    shown without output only has to succeed (exit 0). A command that must fail is not shown in
    a console block.
  - Each file gets its own fresh server, `gpuaas server --demo --listen 127.0.0.1:0 --db
    sqlite:<temporary directory>/demo.db` (its address and demo tokens read from its start-up
    output), and its commands run in order, through bash, in a temporary directory that holds
    links to the repository's top-level entries (paths such as test/testdata/... read as from
    a clone's root; files written land in the temporary directory), with `gpuaas` on PATH (the
    binary under test), GPUAAS_SERVER set to the server's URL and HOME set to an empty
    directory. What a command leaves running is ended when it exits.
  - Variables carry over from one command to the next: every assignment is exported (`set -a`)
    and the environment is kept in a file between commands, so `T=dir` and `export
    GPUAAS_TOKEN=...` hold for the commands after them.
  - Substitutions: `<the operator token make run printed>` and `<the member token make run
    printed>` become the server's demo tokens, and the address 127.0.0.1:8080 (make run's)
    becomes the server's, in commands and in expected output.
  - A command whose line ends in a comment that mentions Ctrl-C (`gpuaas get pools -w   #
    ... (Ctrl-C ends)`) runs for WATCH_MIN_S seconds, and on until what it printed matches (at
    most WATCH_S), and is then interrupted with SIGINT; it passes when it was still running (or
    had exited 0) and what it printed matches.

How output is compared
  - Line by line, after trailing blank lines are dropped and each run of spaces and tabs is
    collapsed to one space (column widths change with the values in them).
  - A line that is exactly "..." matches any number of lines, none included.
  - "…" (U+2026) inside a line matches any text within that line.
  - Values that change from run to run are masked on both sides first (MASKS): API tokens, RFC
    3339 timestamps, GPU and MIG UUIDs (GPU-…, gpu-…, MIG-…), resourceVersions and ages (5s,
    3m, 2h, 4d, 2m30s).
  - Reads may lag writes by a moment (the controllers work asynchronously: a pool is Ready a
    moment after its approval), so a read-only command (READ_ONLY_GPUAAS, curl without a body
    or method, and filters such as grep) that fails or does not match is run again, for up to
    RETRY_S seconds. A write is never run twice.

A failure names the file and line of the command, the command (and what was run, when a
substitution changed it), its exit code, the first expected line that was not found, a unified
diff of expected against actual output (both normalized) and the output itself; when a page has
failures, the end of its server's log follows.
"""

import argparse
import difflib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RETRY_S = 30.0           # how long a read-only command is run again until it matches
COMMAND_TIMEOUT_S = 600  # the most one command may run
WATCH_MIN_S = 3.0        # how long a Ctrl-C command runs at least
WATCH_S = 15.0           # how long a Ctrl-C command may take to print what the page shows
SERVER_START_S = 120     # a server built with sanitizers starts slowly on a loaded machine

# gpuaas commands that change nothing, and so may be run again while a write settles.
READ_ONLY_GPUAAS = {
    ("get",), ("summary",), ("catalog",), ("version",), ("alerts",), ("metrics",), ("sim",),
    ("project", "list"), ("pool", "list"), ("pool", "get"), ("workload", "list"),
    ("token", "list"), ("cluster", "list"), ("defrag", "plan"),
    ("bill", "list"), ("bill", "show"), ("bill", "export"),
}
READ_ONLY_FILTERS = {"grep", "head", "tail", "sort", "uniq", "wc", "cut", "column", "jq", "cat"}
CURL_WRITE_FLAGS = ("-X", "--request", "-d", "--data", "--data-raw", "--data-binary", "--json",
                    "-F", "--form", "-T", "--upload-file")

ELLIPSIS = object()  # a "..." line


# ---------------------------------------------------------------------------------------------
# The pages: console blocks and their commands.

@dataclass
class Command:
    path: str  # the page, relative to the repository
    line: int  # 1-based line of the "$ " line
    text: str  # the command as the page shows it (continuation lines included)
    expected: List[str] = field(default_factory=list)

    def interrupted(self) -> bool:
        """Whether the page says that the command runs until Ctrl-C."""
        return re.search(r"\s#[^\n]*ctrl-c", self.text, re.IGNORECASE) is not None


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)")


def parse_page(text: str, path: str = "<text>") -> List[Command]:
    """Returns the commands of the page's ```console blocks, in order."""
    commands: List[Command] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        body: List[Tuple[int, str]] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                break
            raw = lines[i]
            body.append((i + 1, raw[len(indent):] if raw.startswith(indent) else raw.lstrip()))
            i += 1
        i += 1  # the closing fence
        if lang == "console":
            commands.extend(_parse_console(body, path))
    return commands


def _parse_console(body: List[Tuple[int, str]], path: str) -> List[Command]:
    out: List[Command] = []
    k = 0
    while k < len(body):
        number, line = body[k]
        if not line.startswith("$ "):
            if out:
                out[-1].expected.append(line)
            elif line.strip():
                raise ValueError(f"{path}:{number}: a console block starts with a \"$ \" line")
            k += 1
            continue
        text = line[2:]
        while text.endswith("\\") and k + 1 < len(body):
            k += 1
            text += "\n" + body[k][1]
        out.append(Command(path, number, text))
        k += 1
    return out


# ---------------------------------------------------------------------------------------------
# Comparing output.

MASKS = [
    # API tokens: 16 hex digits, a dot, 48 hex digits.
    (re.compile(r"\b[0-9a-f]{16}\.[0-9a-f]{48}\b"), "<token>"),
    # RFC 3339 timestamps.
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
     "<time>"),
    # GPU and MIG UUIDs, as NVML spells them and as object names (lower case).
    (re.compile(r"\b(GPU|gpu|MIG|mig)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), r"\1-<uuid>"),
    # resourceVersions, in JSON and YAML.
    (re.compile(r"(resourceVersion\"?\s*:\s*\"?)\d+"), r"\1<rv>"),
    # Ages, as kubectl prints them: 5s, 3m, 2h, 4d, 2m30s, 3h10m.
    (re.compile(r"\b\d+[smhd](?:\d+[smh])?\b"), "<age>"),
]


def normalize(line: str) -> str:
    for pattern, replacement in MASKS:
        line = pattern.sub(replacement, line)
    return re.sub(r"[ \t]+", " ", line).rstrip()


def _trim(lines: List[str]) -> List[str]:
    lines = list(lines)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def compile_expected(expected: List[str]) -> list:
    """Turns the page's expected lines into ELLIPSIS or a compiled pattern each."""
    out = []
    for line in _trim(expected):
        if line.strip() == "...":
            out.append(ELLIPSIS)
            continue
        parts = normalize(line).split("…")
        out.append(re.compile(".*".join(re.escape(p) for p in parts), re.DOTALL))
    return out


def _matches(patterns: list, actual: List[str]) -> bool:
    """Whether the patterns match all of `actual` (dynamic programming over both lists)."""
    m = len(actual)
    after = [False] * (m + 1)  # after[j]: the patterns after this one match actual[j:]
    after[m] = True
    for p in reversed(patterns):
        now = [False] * (m + 1)
        if p is ELLIPSIS:
            now[m] = after[m]
            for j in range(m - 1, -1, -1):
                now[j] = after[j] or now[j + 1]
        else:
            for j in range(m):
                now[j] = after[j + 1] and p.fullmatch(actual[j]) is not None
        after = now
    return after[0]


@dataclass
class Verdict:
    ok: bool
    first_missing: Optional[str] = None  # the first expected line that was not found
    diff: str = ""


def compare(expected: List[str], output: str) -> Verdict:
    """Whether `output` is what the page shows. A command shown without output may print
    anything."""
    patterns = compile_expected(expected)
    if not patterns:
        return Verdict(True)
    actual = [normalize(l) for l in _trim(output.split("\n"))]
    if _matches(patterns, actual):
        return Verdict(True)
    # The longest head of the expected lines that the output holds points at the first line
    # that is not there.
    shown = _trim(expected)
    k = len(patterns)
    while k > 0 and not _matches(patterns[:k] + [ELLIPSIS], actual):
        k -= 1
    missing = shown[k] if k < len(shown) else "(the output goes on past the last expected line)"
    diff = "\n".join(difflib.unified_diff([normalize(l) for l in shown], actual, "expected",
                                          "actual", lineterm=""))
    return Verdict(False, missing, diff)


# ---------------------------------------------------------------------------------------------
# Which commands may be run again.

def _segments(text: str) -> List[List[str]]:
    """The simple commands of a command line (split at |, ;, && and ||), each as its words."""
    lex = shlex.shlex(text.replace("\\\n", " "), posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    segments: List[List[str]] = [[]]
    for word in lex:
        if word and set(word) <= set(";&|"):
            segments.append([])
        else:
            segments[-1].append(word)
    return [s for s in segments if s]


def read_only(text: str) -> bool:
    try:
        segments = _segments(text)
    except ValueError:
        return False
    if not segments:
        return False
    for words in segments:
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]
        if not words:
            return False  # an assignment
        prog = os.path.basename(words[0])
        if prog == "gpuaas":
            verbs = [w for w in words[1:] if not w.startswith("-")]
            if not any(tuple(verbs[:len(v)]) == v for v in READ_ONLY_GPUAAS):
                # The agent reads and prints once; with --server it would push.
                if not (verbs[:1] == ["agent"] and "--once" in words and "--server" not in words):
                    return False
        elif prog == "curl":
            if any(w == f or w.startswith(f + "=") for w in words for f in CURL_WRITE_FLAGS):
                return False
        elif prog not in READ_ONLY_FILTERS:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# Running commands.

@dataclass
class Context:
    """Where a page's commands run."""
    workdir: str
    state: str  # the file that keeps the exported variables between commands
    env: dict
    substitutions: dict = field(default_factory=dict)  # text in commands and output -> its value


@dataclass
class Result:
    ok: bool
    rc: Optional[int]  # None: killed after COMMAND_TIMEOUT_S
    output: str
    command: str  # as run
    verdict: Optional[Verdict] = None
    note: str = ""
    attempts: int = 1


def _substitute(text: str, ctx: Context) -> str:
    for k, v in ctx.substitutions.items():
        text = text.replace(k, v)
    return text


def _script(command: str, state: str) -> str:
    q = shlex.quote(state)
    return (f"set -a\n. {q}\n{command}\n__rc=$?\nset +a\n"
            f"export -p | grep -v '^declare -x __rc=' > {q}\nexit $__rc\n")


class _Reader(threading.Thread):
    """Collects a pipe's bytes as they come, so that output can be read while a command runs."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.chunks: List[bytes] = []
        self.lock = threading.Lock()

    def run(self):
        for chunk in iter(lambda: self.stream.read1(65536), b""):
            with self.lock:
                self.chunks.append(chunk)

    def text(self) -> str:
        with self.lock:
            return b"".join(self.chunks).decode("utf-8", errors="replace")


def _signal_group(proc, sig):
    """Signals the command's process group. Called only while the command's own process is not
    yet reaped, so that its id (the group's) cannot have been given to another process."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _exited(proc) -> bool:
    """Whether the process has exited, leaving it unreaped."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_exited(proc, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not _exited(proc):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _run_once(cmd: Command, run_text: str, ctx: Context, expected: List[str]) -> Result:
    script = os.path.join(os.path.dirname(ctx.state), "command.sh")
    with open(script, "w") as f:
        f.write(_script(run_text, ctx.state))
    proc = subprocess.Popen(["bash", script], cwd=ctx.workdir, env=ctx.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        return _finish(cmd, proc, run_text, expected)
    finally:
        if proc.returncode is None:  # the harness itself is stopping
            _signal_group(proc, signal.SIGKILL)
            proc.wait()


def _finish(cmd: Command, proc, run_text: str, expected: List[str]) -> Result:
    reader = _Reader(proc.stdout)
    reader.start()
    interrupted = False
    if cmd.interrupted():
        # It runs for WATCH_MIN_S (a command that acts while it runs, such as an agent that
        # pushes readings, gets to act), then until what it printed matches, up to WATCH_S.
        start = time.monotonic()
        quiet = not _trim(expected)
        while not _exited(proc) and time.monotonic() < start + WATCH_S:
            if time.monotonic() >= start + WATCH_MIN_S and (
                    quiet or compare(expected, reader.text()).ok):
                break
            time.sleep(0.2)
        if not _exited(proc):
            interrupted = True
            _signal_group(proc, signal.SIGINT)
    killed = not _wait_exited(proc, 10 if interrupted else COMMAND_TIMEOUT_S) and not interrupted
    _signal_group(proc, signal.SIGKILL)  # what it left running, or itself if it would not end
    proc.wait()
    reader.join(timeout=5)
    output = reader.text()
    if killed:
        return Result(False, None, output, run_text,
                      note=f"still running after {COMMAND_TIMEOUT_S} s: killed")
    note = "interrupted (Ctrl-C) while running, as the page says" if interrupted else ""
    verdict = compare(expected, output)
    succeeded = proc.returncode == 0 or interrupted
    return Result(succeeded and verdict.ok, proc.returncode, output, run_text, verdict, note)


def run_command(cmd: Command, ctx: Context) -> Result:
    run_text = _substitute(cmd.text, ctx)
    expected = [_substitute(l, ctx) for l in cmd.expected]
    retry = read_only(run_text)
    deadline = time.monotonic() + RETRY_S
    attempts = 0
    while True:
        attempts += 1
        r = _run_once(cmd, run_text, ctx, expected)
        r.attempts = attempts
        if r.ok or not retry or time.monotonic() >= deadline:
            return r
        time.sleep(1.0)


def report(cmd: Command, r: Result) -> str:
    out = [f"{cmd.path}:{cmd.line}: FAILED: $ {cmd.text}"]
    if r.command != cmd.text:
        out.append(f"  as run: $ {r.command}")
    rc = "none" if r.rc is None else str(r.rc)
    out.append(f"  exit code: {rc}" + (f" ({r.note})" if r.note else ""))
    if r.attempts > 1:
        out.append(f"  runs: {r.attempts} in {RETRY_S:.0f} s (a read-only command is run again "
                   "until it matches)")
    if r.verdict is not None and not r.verdict.ok:
        out.append(f"  first expected line not found: {r.verdict.first_missing}")
        out.append("  expected against actual (spaces collapsed, volatile values masked):")
        out.extend("    " + l for l in r.verdict.diff.split("\n"))
    out.append("  output:")
    lines = r.output.rstrip("\n").split("\n") if r.output.strip() else ["(none)"]
    if len(lines) > 200:
        lines = lines[:100] + [f"... ({len(lines) - 200} lines left out) ..."] + lines[-100:]
    out.extend("    | " + l for l in lines)
    return "\n".join(out)


def run_commands(commands: List[Command], ctx: Context, show: bool = False,
                 alive=lambda: True) -> List[str]:
    """Runs the commands in order, printing a line for each and a report for each failure, and
    with `show` what each printed (to write or update a page). Stops when `alive()` says that
    the server is gone. Returns a line per failure."""
    failures = []
    for n, cmd in enumerate(commands):
        if not alive():
            print(f"{cmd.path}: the server is gone: the page's last {len(commands) - n} "
                  "command(s) are not run", flush=True)
            break
        t0 = time.monotonic()
        r = run_command(cmd, ctx)
        first = cmd.text.split("\n")[0]
        runs = f", {r.attempts} runs" if r.attempts > 1 else ""
        print(f"{cmd.path}:{cmd.line}: $ {first} ... {'ok' if r.ok else 'FAILED'} "
              f"({time.monotonic() - t0:.1f} s{runs})", flush=True)
        if r.ok and show:
            print("".join("    | " + l + "\n" for l in r.output.rstrip("\n").split("\n")), end="")
        if not r.ok:
            failures.append(f"{cmd.path}:{cmd.line}: $ {first}")
            print(report(cmd, r), flush=True)
    return failures


# ---------------------------------------------------------------------------------------------
# A demo server per page.

try:
    import ctypes
    _PRCTL = ctypes.CDLL(None).prctl  # looked up here: the child only calls it
except (ImportError, OSError, AttributeError):
    _PRCTL = None


def _die_with_parent():
    """Runs in the server's process before exec: Linux sends it SIGTERM when the harness dies,
    however it dies (PR_SET_PDEATHSIG)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)


class DemoServer:
    def __init__(self, binary: str, directory: str):
        self.binary = binary
        self.directory = directory
        self.log_path = os.path.join(directory, "server.log")
        self.proc = None
        self.url = ""
        self.address = ""
        self.operator_token = ""
        self.member_token = ""

    def start(self):
        """Starts the server and waits until it says where it serves and what its tokens are."""
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [self.binary, "server", "--demo", "--listen", "127.0.0.1:0", "--db",
                 "sqlite:" + os.path.join(self.directory, "demo.db")],
                cwd=self.directory, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            text = self.log()
            serving = re.search(r"serving (http://(127\.0\.0\.1:\d+))", text)
            operator = re.search(r"demo operator token:\s+(\S+)", text)
            member = re.search(r"demo member token[^:]*:\s+(\S+)", text)
            if serving and operator and member:
                self.url, self.address = serving.group(1), serving.group(2)
                self.operator_token, self.member_token = operator.group(1), member.group(1)
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"it exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"it did not print its address and tokens in {SERVER_START_S} s:\n"
                           f"{self.log()}")

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def make_context(directory: str, binary: Optional[str]) -> Context:
    """A working directory that reads as a clone's root, a bin/ with gpuaas, an empty HOME."""
    workdir = os.path.join(directory, "work")
    os.makedirs(workdir)
    for name in sorted(os.listdir(REPO)):
        if name not in (".git", "build"):
            os.symlink(os.path.join(REPO, name), os.path.join(workdir, name))
    bindir = os.path.join(directory, "bin")
    os.makedirs(bindir)
    if binary:
        os.symlink(os.path.abspath(binary), os.path.join(bindir, "gpuaas"))
    home = os.path.join(directory, "home")
    os.makedirs(home)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUAAS_") and k not in ("KUBECONFIG", "OLDPWD")}
    env.update(PATH=bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin"), HOME=home,
               LC_ALL="C.UTF-8", TERM="dumb")
    state = os.path.join(directory, "state.sh")
    open(state, "w").close()
    return Context(workdir, state, env)


def run_page(path: str, binary: str, show: bool = False) -> List[str]:
    rel = os.path.relpath(path, REPO)
    with open(path, encoding="utf-8") as f:
        commands = parse_page(f.read(), rel)
    if not commands:
        return []
    with tempfile.TemporaryDirectory(prefix="gpuaas-docs-") as tmp:
        ctx = make_context(tmp, binary)
        server = DemoServer(os.path.abspath(binary), tmp)
        try:
            server.start()
        except RuntimeError as e:
            print(f"{rel}: the demo server did not start: {e}", flush=True)
            return [f"{rel}: the demo server did not start"]
        try:
            ctx.env["GPUAAS_SERVER"] = server.url
            ctx.substitutions = {
                "<the operator token make run printed>": server.operator_token,
                "<the member token make run printed>": server.member_token,
                "127.0.0.1:8080": server.address,
            }
            print(f"{rel}: {len(commands)} commands against {server.url}", flush=True)
            failures = run_commands(commands, ctx, show, alive=lambda: server.proc.poll() is None)
            exited = server.proc.poll()
            if exited is not None:
                failures.append(f"{rel}: the demo server exited with {exited} during the run")
            if failures:
                state = "exited" if exited is not None else "is still up"
                print(f"{rel}: the server {state}; the end of its log:")
                tail = server.log().rstrip("\n").split("\n")[-40:]
                print("".join("    | " + l + "\n" for l in tail), end="", flush=True)
            return failures
        finally:
            server.stop()


def default_pages() -> List[str]:
    docs = os.path.join(REPO, "docs")
    return [os.path.join(REPO, "README.md")] + [
        os.path.join(docs, n) for n in sorted(os.listdir(docs)) if n.endswith(".md")]


def find_binary(given: Optional[str]) -> Optional[str]:
    for candidate in (given, os.environ.get("GPUAAS_BIN"),
                      os.path.join(REPO, "build/dev/src/exe/gpuaas"),
                      os.path.join(REPO, "build/release/src/exe/gpuaas")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


# ---------------------------------------------------------------------------------------------
# The self-test: the parser, the matcher and the runner on small inline examples, without a
# server. The checks that a wrong output or a failing command fails matter as much as the ones
# that pass.

SAMPLE_PAGE = """# A page

```sh
$ not run: an illustration
```

```console
$ gpuaas summary
Clusters: 2   Nodes: 18

MODEL   GPUS
...
$ gpuaas sim --nodes a.csv \\
    --pods b.csv     # two lines
POLICY   ALLOC
$ export X=1
```

- A list item:

  ```console
  $ echo indented
  indented
  ```

```
$ not run either
```
"""


def _self_test_parser(check):
    cmds = parse_page(SAMPLE_PAGE, "page.md")
    check("only console blocks are run", [c.text.split("\n")[0] for c in cmds] ==
          ["gpuaas summary", "gpuaas sim --nodes a.csv \\", "export X=1", "echo indented"])
    check("a command's line number", [c.line for c in cmds] == [8, 13, 16, 22])
    check("expected output runs to the next command",
          cmds[0].expected == ["Clusters: 2   Nodes: 18", "", "MODEL   GPUS", "..."])
    check("a trailing backslash continues a command",
          cmds[1].text == "gpuaas sim --nodes a.csv \\\n    --pods b.csv     # two lines"
          and cmds[1].expected == ["POLICY   ALLOC"])
    check("a command without output", cmds[2].expected == [])
    check("an indented block loses its indentation",
          cmds[3].text == "echo indented" and cmds[3].expected == ["indented"])
    try:
        parse_page("```console\noutput before any command\n```\n")
        check("a block that starts with output is refused", False)
    except ValueError:
        check("a block that starts with output is refused", True)


def _self_test_matcher(check):
    check("columns of another width match",
          compare(["NAME   AGE", "a      x"], "NAME AGE\na  x\n").ok)
    check("a different value fails", not compare(["NAME AGE", "a x"], "NAME AGE\nb x\n").ok)
    check("a missing line fails", not compare(["a", "b"], "a\n").ok)
    check("an extra line fails", not compare(["a"], "a\nb\n").ok)
    check("an extra line at the end fails", not compare(["a", "b"], "a\nb\nc\n").ok)
    check("no output printed, some shown: fails", not compare(["a"], "").ok)
    check("no output shown: anything printed passes",
          compare([], "a\nb\n").ok and compare([""], "a\n").ok)
    check("... matches no line", compare(["a", "...", "b"], "a\nb\n").ok)
    check("... matches many lines", compare(["a", "...", "b"], "a\n1\n2\n3\nb\n").ok)
    check("... at the end matches the rest", compare(["a", "..."], "a\nb\nc\n").ok)
    check("... does not excuse a wrong line after it",
          not compare(["a", "...", "b"], "a\n1\nc\n").ok)
    check("… matches within a line",
          compare(["pool train: …, Ready"], "pool train: 2 devices, Ready\n").ok)
    check("… does not cross lines", not compare(["a … b"], "a x\ny b\n").ok)
    check("text around … must match",
          not compare(["pool …, Ready"], "pool 2 devices, Waiting\n").ok)
    check("trailing blank lines do not count", compare(["a", ""], "a\n\n\n").ok)
    check("a blank line inside the output counts", not compare(["a", "b"], "a\n\nb\n").ok)
    check("ages are masked", compare(["x 5s", "y 3m"], "x 2h\ny 1d4h\n").ok)
    check("a number is not an age", not compare(["x 5s"], "x 5\n").ok)
    check("timestamps are masked",
          compare(["at 2026-01-01T00:00:00Z"], "at 2027-12-31T23:59:59.123+09:00\n").ok)
    check("GPU UUIDs are masked", compare(["GPU-00000000-0000-0000-0000-000000000000"],
                                          "GPU-3f1a9c2e-1b2c-4d5e-8f90-123456789abc\n").ok)
    check("tokens are masked", compare(["t " + "a" * 16 + "." + "b" * 48],
                                       "t 0123456789abcdef." + "c" * 48 + "\n").ok)
    check("resourceVersions are masked",
          compare(['"resourceVersion": "12"'], '"resourceVersion": "345"\n').ok)
    v = compare(["a", "b", "c"], "a\nb\nx\n")
    check("a failure names the first missing line",
          not v.ok and v.first_missing == "c" and "+x" in v.diff)


def _self_test_read_only(check):
    for text, want in [
            ("gpuaas get pools", True), ("gpuaas pool get train -p vision   # its devices", True),
            ("gpuaas pool approve train -p vision", False), ("gpuaas bill show demo", True),
            ("gpuaas bill budget demo --amount 5", False), ("gpuaas get gpus -o json", True),
            ("gpuaas agent --simulate --gpus 2 --once -o text", True),
            ("gpuaas agent --simulate --server x --once", False),
            ("curl -H 'A: b' 127.0.0.1:8080/api/v1/assessment", True),
            ("curl -X POST 127.0.0.1:8080/x", False),
            ("gpuaas get gpus -o json | head -3", True),
            ("T=x", False), ("export T=x", False), ("rm -rf x", False)]:
        check(f"read_only({text!r}) is {want}", read_only(text) == want)


def _self_test_runner(check, tmp):
    ctx = make_context(tmp, None)
    ctx.substitutions = {"<the operator token make run printed>": "tok",
                         "127.0.0.1:8080": "127.0.0.1:1234"}

    def run(text, expected=()):
        return run_command(Command("self", 1, text, list(expected)), ctx)

    check("a matching command passes", run("echo 'a   b'", ["a b"]).ok)
    r = run("echo hello", ["goodbye"])
    check("a mismatch fails", not r.ok and r.rc == 0 and r.verdict.first_missing == "goodbye")
    check("a mismatch is reported with a diff",
          "-goodbye" in report(Command("self", 1, "echo hello"), r) and "+hello" in r.verdict.diff)
    r = run("echo hello; exit 3", ["hello"])
    check("a non-zero exit fails even when the output matches", not r.ok and r.rc == 3)
    check("a command without output shown must succeed", not run("false").ok and run("true").ok)
    check("stderr counts as output", run("echo oops >&2", ["oops"]).ok)
    run("X=41")
    run("export Y=$((X + 1))")
    check("assignments carry over to later commands", run("echo $X $Y", ["41 42"]).ok)
    check("the operator token is substituted",
          run("echo <the operator token make run printed>", ["tok"]).ok)
    check("the address is substituted in commands and output",
          run("echo http://127.0.0.1:8080/x", ["http://127.0.0.1:8080/x"]).ok
          and run("echo 127.0.0.1:8080", ["127.0.0.1:1234"]).ok)
    check("commands run where test/ reads as from the repository's root",
          run("test -f test/docs_test.py && echo yes", ["yes"]).ok)
    t0 = time.monotonic()
    r = run("echo first; sleep 60   # runs until Ctrl-C", ["first"])
    check("a Ctrl-C command is interrupted once it printed what is shown",
          r.ok and time.monotonic() - t0 < WATCH_S)
    r = run("echo first; sleep 60   # (Ctrl-C ends)", ["second"])
    check("a Ctrl-C command that printed something else fails", not r.ok)
    check("a Ctrl-C command that exits non-zero fails", not run("exit 4   # (Ctrl-C ends)").ok)
    check("a Ctrl-C command with nothing shown passes while it runs",
          run("sleep 60   # Ctrl-C ends it").ok)
    marker = os.path.join(tmp, "left-running")
    run(f"(sleep 2; touch {marker}) &")
    time.sleep(3)
    check("what a command leaves running is ended", not os.path.exists(marker))

    # A read-only command is run again until its output matches: the file says "done" after
    # two seconds.
    flag = os.path.join(tmp, "flag")
    with open(flag, "w") as f:
        f.write("waiting\n")

    def done():
        with open(flag, "w") as f:
            f.write("done\n")

    timer = threading.Timer(2.0, done)
    timer.start()
    r = run(f"cat {flag}", ["done"])
    timer.join()
    check("a read-only command is run again until it matches", r.ok and r.attempts > 1)
    r = run(f"echo x >> {flag}.w; wc -l < {flag}.w; export Z=1", ["3"])
    check("a write is run once", not r.ok and r.attempts == 1)
    t0 = time.monotonic()
    r = run("cat /nonexistent", ["x"])
    check("a read-only command that never matches fails after the retry time",
          not r.ok and r.attempts > 1 and time.monotonic() - t0 < RETRY_S + 10)


def self_test() -> int:
    global RETRY_S, WATCH_MIN_S, WATCH_S
    failed = []

    def check(name, cond):
        print(f"{'ok' if cond else 'FAILED'}: {name}")
        if not cond:
            failed.append(name)

    _self_test_parser(check)
    _self_test_matcher(check)
    _self_test_read_only(check)
    saved = RETRY_S, WATCH_MIN_S, WATCH_S
    RETRY_S, WATCH_MIN_S, WATCH_S = 5.0, 0.5, 3.0
    try:
        with tempfile.TemporaryDirectory(prefix="gpuaas-docs-self-") as tmp:
            _self_test_runner(check, tmp)
    finally:
        RETRY_S, WATCH_MIN_S, WATCH_S = saved
    print(f"\nself-test: {'FAILED: ' + ', '.join(failed) if failed else 'all checks passed'}")
    return 1 if failed else 0


def _exit_on_signal(signum, _frame):
    # Unwinds through the `finally` blocks, which end the running command and the server.
    raise SystemExit(128 + signum)


def main() -> int:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    ap = argparse.ArgumentParser(description="Runs the commands README.md and docs/*.md show.")
    ap.add_argument("pages", nargs="*", help="Markdown files (default: README.md, docs/*.md)")
    ap.add_argument("--bin", help="the gpuaas binary (default: $GPUAAS_BIN, else build/dev's "
                                  "or build/release's)")
    ap.add_argument("--show-output", action="store_true", help="print what each command printed")
    ap.add_argument("--self-test", action="store_true", help="check the parser, the matcher "
                                                             "and the runner")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    binary = find_binary(args.bin)
    if binary is None:
        print("no gpuaas binary: give --bin or set GPUAAS_BIN", file=sys.stderr)
        return 1
    if shutil.which("bash") is None:
        print("bash is needed to run the pages' commands", file=sys.stderr)
        return 1
    pages = [os.path.abspath(p) for p in args.pages] or default_pages()
    failures = []
    t0 = time.monotonic()
    for page in pages:
        failures += run_page(page, binary, args.show_output)
    print(f"\n{len(failures)} failed command(s) in {time.monotonic() - t0:.0f} s"
          + (" (each is reported above):" if failures else ""))
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
