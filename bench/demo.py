"""How often ``./dev demo`` completes, run the way a newcomer runs it: in a terminal session, answering every
question with the default (``a``, approve).

Each run is ``./dev demo --interactive`` with ``a`` lines on its standard input (the demo asks in the
terminal: the approval of the numbers, then the consent to each placement the model proposes). A run counts
as completed when all of these hold: the command exits 0, the agent step's outcome is ``completed
(proven)`` (its ``done_when`` held on a receipt), the review was placed (``← place review …``) and the run
ended ``completed``. Every run starts from a fresh example week (``./dev demo`` resets it).

The model samples greedily by default, so repeated runs on a quiet machine take one path; ``--temperature
T`` samples instead (``PLANGATE_LOCAL_TEMPERATURE``), with the seed ``--seed + i`` for the i-th run
(``PLANGATE_LOCAL_SEED``): independent tries of one model. The load average is printed before and after;
``PLANGATE_LOCAL_THREADS`` is passed through as it is set.

Run:  .venv/bin/python bench/demo.py                         (10 runs, greedy)
      .venv/bin/python bench/demo.py --temperature 0.3       (10 sampled runs, seeds 1..10)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANSWERS = "a\n" * 12
"""More answers than the demo can ask for (one approval, then a consent per round, four rounds at most)."""


@dataclass(frozen=True)
class Run:
    code: int
    proven: bool
    placed: bool
    completed: bool
    rounds: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.code == 0 and self.proven and self.placed and self.completed


def run_demo(env: dict[str, str], timeout: float) -> Run:
    started = time.perf_counter()
    try:
        done = subprocess.run(
            ["./dev", "demo", "--interactive"],
            cwd=ROOT,
            input=ANSWERS,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = str(exc.stdout or "") + str(exc.stderr or ""), 124
    lines = output.splitlines()
    return Run(
        code=code,
        proven="schedule › outcome: completed (proven)" in lines,
        placed=any(line.startswith("schedule ›   ← place review ") for line in lines),
        completed=re.search(r"^run run_\S+ completed: all 3 steps finished$", output, re.M) is not None,
        rounds=sum(1 for line in lines if re.match(r"schedule › round \d+ ", line)),
        seconds=time.perf_counter() - started,
    )


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--temperature", type=float, default=None, help="sample at T (default: greedy)")
    parser.add_argument("--seed", type=int, default=1, help="the first run's seed, when sampling")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a run may take")
    args = parser.parse_args()
    print(f"load average before: {load()}; threads: {os.environ.get('PLANGATE_LOCAL_THREADS', 'default')}; "
          f"temperature: {args.temperature if args.temperature is not None else 'greedy'}")
    runs: list[Run] = []
    for i in range(args.runs):
        env = {key: value for key, value in os.environ.items() if key != "PLANGATE_MODEL"}
        if args.temperature is not None:
            env["PLANGATE_LOCAL_TEMPERATURE"] = str(args.temperature)
            env["PLANGATE_LOCAL_SEED"] = str(args.seed + i)
        runs.append(run_demo(env, args.timeout))
        r = runs[-1]
        print(f"{i + 1:>3}. {'completed' if r.ok else 'NOT completed'}  exit {r.code}  proven={r.proven} "
              f"placed={r.placed} run_completed={r.completed} rounds={r.rounds} {r.seconds:.0f} s  "
              f"load {load()}")
    print(f"demo runs completed: {sum(r.ok for r in runs)}/{len(runs)}   target >= 9/10")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
