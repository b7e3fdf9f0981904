#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ZipNN's CPU seconds (user + system of every thread of its process) for one compress and one
decompress of FILE, each in a process of its own as zipnn_measure.py runs them (ZipNN's C core
keeps the buffers it returns). Prints one JSON line: {"comp_cpu": S, "decomp_cpu": S}.

  bench/zipnn_cpu.py ZIPNN_MEASURE_PY FILE DTYPE THREADS

ZIPNN_MEASURE_PY: ../shared/peers/zipnn/zipnn_measure.py as built by its build.sh (it finds
ZipNN beside itself); this imports its load_zipnn(). For bench/peers.sh.
"""
import importlib.util, json, os, resource, subprocess, sys, tempfile


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return r.ru_utime + r.ru_stime


def one(measure, mode, path, dtype, threads, blob):
    spec = importlib.util.spec_from_file_location("zipnn_measure", measure)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    z = m.load_zipnn()(input_format="byte", bytearray_dtype=dtype, threads=threads)
    if mode == "comp":
        inp = bytearray(open(path, "rb").read())
        t0 = cpu(); c = z.compress(inp); dt = cpu() - t0
        open(blob, "wb").write(bytes(c))
    else:
        c = open(blob, "rb").read()
        t0 = cpu(); z.decompress(c); dt = cpu() - t0
    return dt


def main():
    if sys.argv[1] == "--one":
        _, _, measure, mode, path, dtype, threads, blob = sys.argv
        print(one(measure, mode, path, dtype, int(threads), blob))
        return
    measure, path, dtype, threads = sys.argv[1:5]
    result = {}
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None) as tmp:
        for mode in ("comp", "decomp"):
            out = subprocess.run([sys.executable, __file__, "--one", measure, mode, path, dtype, threads,
                                  os.path.join(tmp, "z")], check=True, capture_output=True, text=True).stdout
            result[f"{mode}_cpu"] = float(out.strip().splitlines()[-1])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
