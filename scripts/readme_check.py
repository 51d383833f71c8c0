#!/usr/bin/env python3
"""Runs the README's shell examples against a fresh demo and checks what they say they answer.

A fenced ``sh`` block right after a ``<!-- readme-check: GROUP -->`` line is run; the blocks of one
group run in order in one bash, so a later block uses the variables an earlier one set. Every
group starts with the demo's ``KEY`` (its API key) and ``C`` (its sandbox channel) set, and
``localhost:8080`` is the demo's address. A command line whose comment ends in ``⇒ TEXT`` must
print TEXT.

    python3 scripts/readme_check.py [README.md]      # PARLEY_BIN: the binary (default: the build's)
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

EXPECT = re.compile(r"^(?P<command>.*?)\s+#[^⇒]*⇒ (?P<text>.+)$")
MARKER = re.compile(r"^<!-- readme-check: (?P<group>[\w-]+) -->$")


def blocks(readme):
    """(group, block text) in README order."""
    found, group, inside, lines = [], None, False, []
    for line in readme.splitlines():
        marker = MARKER.match(line.strip())
        if marker and not inside:
            group = marker["group"]
        elif line.startswith("```sh") and group and not inside:
            inside, lines = True, []
        elif line.startswith("```") and inside:
            found.append((group, "\n".join(lines)))
            inside, group = False, None
        elif inside:
            lines.append(line)
    return found


def commands(block):
    """The block's commands, each as its lines: a command goes on while a single quote is open
    or its line ends in a backslash."""
    command, quotes = [], 0
    for line in block.splitlines():
        command.append(line)
        # A comment's apostrophes open nothing (outside quotes, ` #` starts a comment).
        code = line if quotes % 2 else re.split(r"\s#", line, maxsplit=1)[0]
        quotes += code.count("'")
        if quotes % 2 == 0 and not line.endswith("\\"):
            yield command
            command, quotes = [], 0
    if command:
        yield command


def checked(block):
    """The block with every command whose comment ends in `⇒ TEXT` turned into a check of its
    output."""
    out = []
    for lines in commands(block):
        expect = EXPECT.match(lines[-1])
        if not expect:
            out.extend(lines)
            continue
        command = "\n".join(lines[:-1] + [expect["command"]])
        text = expect["text"].strip()
        out.append(
            f"__out=$({command}); printf '%s\\n' \"$__out\"; "
            f"grep -qF -- {shlex.quote(text)} <<<\"$__out\" || "
            f"{{ echo {shlex.quote('README check: expected ' + text)} >&2; exit 1; }}"
        )
    return "\n".join(out)


def start_demo(binary, data_dir):
    demo = subprocess.Popen(
        [binary, "serve", "--demo", "--data-dir", data_dir, "--bind", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    banner = {}
    deadline = time.time() + 60
    for line in demo.stdout:
        for name, pattern in [
            ("base", r"running offline at (\S+)"),
            ("key", r"^API key \(.*\): (\S+)"),
            ("channel", r"^Sandbox channel: (\S+)"),
        ]:
            found = re.search(pattern, line)
            if found:
                banner[name] = found.group(1)
        if len(banner) == 3 or time.time() > deadline:
            break
    if len(banner) != 3:
        demo.kill()
        sys.exit(f"README check: the demo's banner lacks {set(['base', 'key', 'channel']) - set(banner)}")
    return demo, banner


def main():
    readme_path = sys.argv[1] if len(sys.argv) > 1 else "README.md"
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    binary = os.environ.get("PARLEY_BIN", os.path.join(target, "debug", "parley"))
    found = blocks(open(readme_path, encoding="utf-8").read())
    if not found:
        sys.exit("README check: no block is marked <!-- readme-check: GROUP -->")
    groups = {}
    for group, block in found:
        groups.setdefault(group, []).append(block)
    with tempfile.TemporaryDirectory() as data_dir:
        demo, banner = start_demo(binary, data_dir)
        address = banner["base"].removeprefix("http://")
        failed = []
        try:
            for group, parts in groups.items():
                script = "set -euo pipefail\n" + "\n".join(checked(p) for p in parts)
                script = script.replace("localhost:8080", address)
                env = dict(os.environ, KEY=banner["key"], C=banner["channel"])
                print(f"\n== README check: {group} ({len(parts)} block(s))", flush=True)
                run = subprocess.run(["bash", "-c", script], env=env, timeout=120)
                if run.returncode != 0:
                    failed.append(group)
        finally:
            demo.terminate()
            demo.wait(timeout=30)
    if failed:
        sys.exit(f"\nREADME check failed: {', '.join(failed)}")
    print(f"\nREADME check: {len(found)} blocks in {len(groups)} groups ran as written")


if __name__ == "__main__":
    main()
