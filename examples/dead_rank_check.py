"""A rank dies in the middle of training; the others must get an error, not
hang (issue: errors the way PyTorch expects them). Starts WORLD copies of
examples/train_gpt.py directly (not under torchrun, which would kill the
survivors itself), makes rank DIE exit abruptly at a step, and checks that
every other rank ends, with a non-zero status, within LIMIT seconds: the
error reached PyTorch (through ncclCommGetAsyncError with NCCL/hetccl, its
watchdog then aborts the communicator), the survivors did not hang.

    LD_PRELOAD=build/libhetccl.so python3 examples/dead_rank_check.py [--domains]

--domains puts each rank in its own domain (HETCCL_DOMAIN=d<rank>).
Exit status 0 when the check holds. Runs on CPU ranks with Gloo too.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--world", type=int, default=2)
p.add_argument("--die", type=int, default=1)
p.add_argument("--limit", type=float, default=90)
p.add_argument("--pg-timeout", type=float, default=300, help="PyTorch's own timeout: well above --limit")
p.add_argument("--domains", action="store_true")
p.add_argument("--port", type=int, default=29561)
p.add_argument("--report-only", action="store_true",
               help="exit 0 whatever happened (for a comparison run, e.g. plain NCCL, which may wait out --pg-timeout)")
p.add_argument("--tail", type=int, default=6, help="lines of each rank's output to print")
p.add_argument("--backtrace", action="store_true", help="gdb's backtraces of a hung rank (where gdb exists)")
p.add_argument("--train-args", default="", help="more arguments for train_gpt.py (e.g. a smaller model on CPUs)")
a = p.parse_args()

here = os.path.dirname(os.path.abspath(__file__))
DIED_ON_PURPOSE = 43  # train_gpt.py exits with this at --die-at-step
procs = []
for r in range(a.world):
    env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.world), LOCAL_WORLD_SIZE=str(a.world),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    if a.domains:
        env["HETCCL_DOMAIN"] = f"d{r}"
    cmd = [sys.executable, os.path.join(here, "train_gpt.py"), "--steps", "1000", "--die-rank", str(a.die),
           "--die-at-step", "5", "--pg-timeout", str(a.pg_timeout)] + a.train_args.split()
    procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))

start = time.monotonic()
died_at = None
status = [None] * a.world
while True:  # until the others end, or `limit` seconds after the death (start-up: up to 120 s)
    elapsed = time.monotonic() - start
    if elapsed > (died_at + a.limit + 5 if died_at is not None else 120):
        break
    for r, proc in enumerate(procs):
        if status[r] is None and proc.poll() is not None:
            status[r] = (proc.returncode, time.monotonic() - start)
            if r == a.die:
                died_at = status[r][1]
    if all(s is not None for s in status):
        break
    time.sleep(0.1)

ok = True
for r, proc in enumerate(procs):
    if status[r] is None:
        proc.send_signal(signal.SIGUSR1)  # train_gpt.py prints its Python stacks
        if a.backtrace and shutil.which("gdb"):
            subprocess.run(["gdb", "-batch", "-p", str(proc.pid), "-ex", "thread apply all bt 12"],
                           stdout=sys.stderr, stderr=subprocess.STDOUT, timeout=60)
        time.sleep(1)
        proc.kill()
    out = proc.communicate()[0] or ""
    tail = "\n".join("    " + line for line in out.strip().splitlines()[-a.tail:])
    if r == a.die:
        # It must die where it was told to (not, say, fail to start: then
        # the others fail too and nothing was shown).
        died_right = status[r] is not None and status[r][0] == DIED_ON_PURPOSE
        ok = ok and died_right
        print(f"rank {r}: exited with {status[r][0] if status[r] else 'nothing (still running)'} "
              f"({'as told' if died_right else f'FAIL: it was told to die with {DIED_ON_PURPOSE} at step 5'})\n{tail if not died_right else ''}")
        continue
    if status[r] is None:
        ok = False
        print(f"rank {r}: HUNG: still running {time.monotonic() - start - (died_at or 0):.0f} s after rank {a.die} died\n{tail}")
        continue
    code, t = status[r]
    waited = t - (died_at or 0)
    good = code != 0 and waited <= a.limit
    ok = ok and good
    print(f"rank {r}: {'ok' if good else 'FAIL'}: exited with {code} {waited:.1f} s after rank {a.die} died\n{tail}")
print("dead rank check:", "passed" if ok else "FAILED")
sys.exit(0 if ok or a.report_only else 1)
