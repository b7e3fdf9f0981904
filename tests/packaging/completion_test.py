#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shell completion that `vramflow completion bash|zsh` writes.

Coverage: every subcommand and every option that `--help` shows, at every
level of the command tree (walked through --help, independently of the
completion code), is in the script's tables for that command.
Behaviour: bash, with the script sourced, completes partial words as a user
at a prompt would see; zsh parses the script and reads the same tables.

usage: completion_test.py VRAMFLOW_BINARY
"""
import re
import shutil
import subprocess
import sys
import tempfile

vramflow = sys.argv[1]
failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


def help_of(path):
    out = subprocess.run([vramflow, *path.split(), "--help"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"`vramflow {path} --help` failed: {out.stderr}")
    return out.stdout


def parse_help(text):
    """Options and subcommands that a --help text lists."""
    options, subcommands, in_subs = set(), [], False
    for line in text.splitlines():
        if line.startswith("Subcommands:"):
            in_subs = True
            continue
        if in_subs:
            m = re.match(r"^  (\S+)\s", line)
            if m:
                subcommands.append(m.group(1))
                continue
            if line.strip() == "":
                in_subs = False
            continue
        m = re.match(r"^\s+(-[^\s]+)", line)
        if m and re.fullmatch(r"-[-\w,]+", m.group(1)):
            options.update(n for n in m.group(1).split(",") if n.startswith("-"))
    return options, subcommands


script = subprocess.run([vramflow, "completion", "bash"], capture_output=True, text=True, check=True).stdout
with tempfile.NamedTemporaryFile("w", suffix=".bash", delete=False) as f:
    f.write(script)
    bash_script = f.name


def bash(code):
    out = subprocess.run(["bash", "-c", f"source {bash_script}\n{code}"], capture_output=True, text=True)
    check(out.returncode == 0 and not out.stderr, f"bash failed on {code!r}: {out.stderr}")
    return out.stdout


def table(kind, path):
    return set(bash(f'_vramflow_table {kind} "{path}"').split())


# Walk the whole tree through --help.
paths, checked = [""], 0
while paths:
    path = paths.pop()
    options, subcommands = parse_help(help_of(path))
    have_opts, have_subs = table("opts", path), table("subs", path)
    for option in options:
        check(option in have_opts, f"`vramflow {path}`: option {option} missing from the completion")
        checked += 1
    for sub in subcommands:
        check(sub in have_subs, f"`vramflow {path}`: subcommand {sub} missing from the completion")
        paths.append(f"{path} {sub}".strip())
        checked += 1
check(checked > 200, f"only {checked} names found in --help: the help parser is broken")


def complete(words):
    """What bash offers for the command line `words` (the last one is being typed)."""
    array = " ".join(f"'{w}'" for w in words)
    return bash(f"COMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; _vramflow; printf '%s\\n' \"${{COMPREPLY[@]}}\"").split()


cases = [
    (["vramflow", "re"], ["recv"]),
    (["vramflow", "bench", ""], ["codecs", "pipeline"]),
    (["vramflow", "recv", "--output-"], ["--output-dir"]),
    (["vramflow", "-o", "x", "recv", "--cou"], ["--count"]),
    # A value that is a subcommand's name is a value: `pack` stays the command.
    (["vramflow", "pack", "-o", "recv", "--cod"], ["--codec"]),
    # The value of an option: file names, from the shell (nothing from us).
    (["vramflow", "pack", "-o", ""], []),
    # streamer's options follow its subcommands (CLI11 fallthrough).
    (["vramflow", "streamer", "capture", "--images-d"], ["--images-dir"]),
    (["vramflow", "criu", "ex"], ["export-upstream"]),
]
for words, expected in cases:
    got = complete(words)
    check(got == expected, f"{' '.join(words)}<TAB>: expected {expected}, got {got}")
check("completion" not in complete(["vramflow", "comp"]), "the hidden `completion` command is offered")

# zsh: the script parses, and its tables read the same as bash's.
zsh = shutil.which("zsh")
if not zsh:
    failures.append("zsh is not installed (scripts/setup.sh installs it)")
else:
    zscript = subprocess.run([vramflow, "completion", "zsh"], capture_output=True, text=True, check=True).stdout
    check(zscript.startswith("#compdef vramflow\n"), "the zsh script does not start with #compdef vramflow")
    with tempfile.NamedTemporaryFile("w", suffix=".zsh", delete=False) as f:
        f.write(zscript)
    parse = subprocess.run([zsh, "-n", f.name], capture_output=True, text=True)
    check(parse.returncode == 0 and not parse.stderr, f"zsh -n: {parse.stderr}")
    # Everything up to the final call, which needs zsh's completion system.
    body = zscript.rsplit("\n_vramflow ", 1)[0]
    out = subprocess.run([zsh, "-c", body + '\n_vramflow_table opts "recv"'], capture_output=True, text=True)
    check(set(out.stdout.split()) == table("opts", "recv"), f"zsh's table for recv differs: {out.stdout} {out.stderr}")

for failure in failures:
    print("FAIL:", failure)
print(f"{checked} subcommands and options from --help checked; {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
