#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Runs a command and prints its wall seconds and the CPU seconds (user, system) that it and its
children used, to the microsecond (wait4's rusage), as one line: WALL USER SYSTEM.

  bench/cputime.py [-o OUT] [-r FILE] CMD...   -o: CMD's stdout to OUT (e.g. /dev/null);
                                               -r FILE: the line to FILE instead of stdout

For bench/peers.sh: /usr/bin/time prints 10 ms, which is a few percent of a 256 MiB run.
"""
import os, sys, time

def main():
    args, out, report = sys.argv[1:], None, None
    while args and args[0] in ("-o", "-r"):
        if args[0] == "-o": out = args[1]
        else: report = args[1]
        args = args[2:]
    if not args:
        sys.exit("usage: cputime.py [-o OUT] [-r FILE] CMD...")
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            if out:
                fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
            os.execvp(args[0], args)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    line = f"{wall:.6f} {usage.ru_utime:.6f} {usage.ru_stime:.6f}\n"
    if report:
        open(report, "w").write(line)
    else:
        sys.stdout.write(line)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"cputime.py: {args[0]} exited with {code}")

main()
