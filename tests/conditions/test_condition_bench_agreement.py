"""The benchmark compares like with like: each expression means the same in plangate and both CEL engines."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "conditions.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_conditions", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_every_engine_gives_the_same_verdict_on_every_benchmark_expression() -> None:
    pytest.importorskip("celpy")
    pytest.importorskip("cel")
    prepared = _bench().prepare()
    assert len(prepared) == 10
    verdicts = {item.label: item.verdicts() for item in prepared}
    assert all(len(set(found)) == 1 for found in verdicts.values()), verdicts
