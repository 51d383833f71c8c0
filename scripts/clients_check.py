#!/usr/bin/env python3
"""Generates clients from a fresh demo's /openapi.json and runs a short program with each.

- Python: `openapi-python-client` (PyPI) generates `parley_client`; scripts/clients/program.py
  uses it: a worker and an assistant, a chat, the messages, an identity's metadata, a memory
  value.
- TypeScript: `openapi-typescript` (npm) generates the types; scripts/clients/program.ts uses
  them, compiled by `tsc --strict` and run with node.

    python3 scripts/clients_check.py      # PARLEY_BIN: the binary; CLIENT_TOOLS: where the
                                          # npm packages are installed (node_modules/.bin)
"""

import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readme_check import start_demo  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def run(command, **kwargs):
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, timeout=300, **kwargs)


def python_client(document, banner, work):
    package = os.path.join(work, "python")
    run(["openapi-python-client", "generate", "--path", document, "--output-path",
         os.path.join(package, "parley_client"), "--meta", "none", "--fail-on-warning"])
    env = dict(os.environ, PYTHONPATH=package)
    run([sys.executable, os.path.join(HERE, "clients", "program.py"), banner["base"],
         banner["key"], banner["channel"]], env=env)


def typescript_client(document, banner, work):
    tools = os.environ.get("CLIENT_TOOLS", os.path.join(work, "tools"))
    binaries = os.path.join(tools, "node_modules", ".bin")
    if not os.path.exists(os.path.join(binaries, "tsc")):
        os.makedirs(tools, exist_ok=True)
        run(["npm", "install", "--silent", "--prefix", tools, "openapi-typescript@7", "typescript@5"])
    project = os.path.join(work, "typescript")
    os.makedirs(project)
    shutil.copy(os.path.join(HERE, "clients", "program.ts"), project)
    run([os.path.join(binaries, "openapi-typescript"), document, "-o",
         os.path.join(project, "parley.d.ts")])
    run([os.path.join(binaries, "tsc"), "--strict", "--target", "es2022", "--module", "commonjs",
         "--types", "node", "--typeRoots", os.path.join(tools, "node_modules", "@types"),
         "--outDir", os.path.join(project, "out"), os.path.join(project, "program.ts")])
    run(["node", os.path.join(project, "out", "program.js"), banner["base"], banner["key"],
         banner["channel"]])


def main():
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    binary = os.environ.get("PARLEY_BIN", os.path.join(target, "debug", "parley"))
    with tempfile.TemporaryDirectory() as work:
        demo, banner = start_demo(binary, os.path.join(work, "data"))
        try:
            document = os.path.join(work, "openapi.json")
            with urllib.request.urlopen(banner["base"] + "/openapi.json") as answer:
                open(document, "wb").write(answer.read())
            python_client(document, banner, work)
            typescript_client(document, banner, work)
        finally:
            demo.terminate()
            demo.wait(timeout=30)
    print("\nClients check: the Python client and the TypeScript types worked against the demo")


if __name__ == "__main__":
    main()
