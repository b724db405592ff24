"""Reading a sharecheck trace file as `sharecheck report` does: the file, then the records its ring
file (FILE.ring) still holds when the process ended without exit handlers. The ring holds compact
binary records (layout: core/src/ring.rs), so this asks `sharecheck cat` for them: the CLI at
$SHARECHECK_CLI, else target/release/sharecheck of this checkout. Used by check_traces.py and
gpu-rules.sh."""
import os
import subprocess

RING_SUFFIX = ".ring"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli():
    return os.environ.get("SHARECHECK_CLI") or os.path.join(ROOT, "target", "release", "sharecheck")


def read_lines(path):
    """The trace's records, one JSON text per line: the file's, then its ring's (a record both
    hold once). Space never filled and records cut short are left out."""
    done = subprocess.run([cli(), "cat", "--", path], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise RuntimeError("sharecheck cat %s failed (%d): %s"
                           % (path, done.returncode, done.stderr.decode(errors="replace")))
    return [l for l in done.stdout.decode("utf-8", "replace").splitlines() if l.strip()]


def is_trace(name):
    return ".jsonl" in name and not name.endswith(RING_SUFFIX)
