#!/usr/bin/env python3
"""Record the observer's records of one run, for a golden judgement.

    python3 record.py OBSERVER OUT.records [--cupti LIBCUPTI] -- PROGRAM [ARGS...]

Runs PROGRAM under the trace observer as `miotool trace` does (the observer
preloaded, CUDA's injection pointed at it, its records sent to a socket of
this script's own), passes the program's standard streams through, and
writes to OUT.records every record the observer sent, in the order they
arrived, after the facts of the run that the records do not hold ("#!"
lines: the program, the file that ran, how it ended). OBSERVER is the
library `miotool --verbose trace -- true` names (or one `go test` built). Exits
with the program's status.

Then `go test ./internal/cmd/trace -run TestGolden -update` writes
OUT.golden beside it: read it, and commit both.
"""

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading


def usage(msg):
    sys.stderr.write("record.py: %s\nusage: %s\n" % (msg, __doc__.strip().splitlines()[2].strip()))
    sys.exit(2)


def main(argv):
    if "--" not in argv:
        usage("put -- before the program")
    dash = argv.index("--")
    ours, program = argv[:dash], argv[dash + 1:]
    cupti = None
    if "--cupti" in ours:
        i = ours.index("--cupti")
        if i + 1 >= len(ours):
            usage("--cupti needs a library")
        cupti = ours[i + 1]
        del ours[i:i + 2]
    if len(ours) != 2 or not program:
        usage("want OBSERVER, OUT.records and a program")
    observer, out = os.path.abspath(ours[0]), ours[1]
    if not os.path.isfile(observer):
        usage("no observer library at %s" % observer)
    path = shutil.which(program[0]) or program[0]

    folder = tempfile.mkdtemp(prefix="miotool-record-")
    address = os.path.join(folder, "ev")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(address)
    records = []
    done = threading.Event()

    def read():
        sock.settimeout(0.2)
        while True:
            try:
                data = sock.recv(1 << 16)
            except socket.timeout:
                if done.is_set():
                    return  # the program has ended and nothing is left
                continue
            records.extend(line for line in data.decode("utf-8", "replace").split("\n") if line)

    reader = threading.Thread(target=read)
    reader.start()
    env = dict(os.environ)
    env["MIOTOOL_TRACE_SOCKET"] = address
    env["CUDA_INJECTION64_PATH"] = observer
    env["LD_PRELOAD"] = observer + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    if cupti:
        env["MIOTOOL_TRACE_CUPTI"] = os.path.abspath(cupti)
    try:
        status = subprocess.call(program, env=env)
    except OSError as e:
        usage("%s: %s" % (program[0], e.strerror))
    finally:
        done.set()
        reader.join()
        sock.close()
        shutil.rmtree(folder, ignore_errors=True)

    facts = ["#! program " + shlex.join(program), "#! path " + os.path.abspath(path)]
    if status < 0:
        facts.append("#! signal " + signal.Signals(-status).name)
    else:
        facts.append("#! exit %d" % status)
    with open(out, "w") as f:
        f.write("# recorded by record.py: %s\n" % shlex.join(program))
        f.write("\n".join(facts + records) + "\n")
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
