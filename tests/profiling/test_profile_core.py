"""The framework-free part: building the tree from records, exclusion, aggregation, formatting."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from deeplite_like.profiling import ModuleRecord, PhaseStats, build_profile, views as fmt
from deeplite_like.results import OpStats


def record(name, type_, parent, params, fwd, bwd=(0, 0), ops=None, latency=None):
    phases = {"forward": OpStats(*fwd, 0)}
    if bwd != (0, 0):
        phases["backward"] = OpStats(*bwd, 0)
    return ModuleRecord(name, type_, parent, params=params, calls=1, phases=phases,
                        ops={k: OpStats(*v) for k, v in (ops or {}).items()}, latency_s=latency)


def toy(excluded=()):
    """root (Model) -> a (Block) -> a.x (Dense), a.y (Act); root -> b (Dense). Figures (MACs, FLOPs):

    a.x fwd (10, 25) bwd (20, 45); a.y fwd (0, 5) bwd (0, 5); a adds (0, 3) of its own in forward
    -> a fwd (10, 33) bwd (20, 50); b fwd (4, 9); root adds (0, 1) -> root fwd (14, 43) bwd (20, 50).
    """
    records = [
        record("", "Model", None, 70, (14, 43), (20, 50), {"mul": (0, 1, 1)}, latency=1.0),
        record("a", "Block", "", 60, (10, 33), (20, 50), {"add": (0, 3, 1)}, latency=0.6),
        record("a.x", "Dense", "a", 60, (10, 25), (20, 45), {"matmul": (30, 70, 2)}, latency=0.4),
        record("a.y", "Act", "a", 0, (0, 5), (0, 5), {"relu": (0, 10, 2)}, latency=0.1),
        record("b", "Dense", "", 10, (4, 9), ops={"matmul": (4, 9, 1)}, latency=0.3),
    ]
    phases = {"forward": PhaseStats(14, 43, 5, 1.0), "backward": PhaseStats(20, 50, 4, 2.0),
              "other": PhaseStats(0, 2, 1)}
    by_operator = {"matmul": OpStats(34, 79, 3), "relu": OpStats(0, 10, 2), "add": OpStats(0, 3, 1),
                   "mul": OpStats(0, 1, 1), "sum": OpStats(0, 2, 1)}
    return build_profile("Model", "test", records, phases=phases, by_operator=by_operator,
                         outside={"sum": OpStats(0, 2, 1)}, excluded_names=excluded, params=70,
                         duration_s=4.0, module_latency=True)


def test_tree_and_totals():
    p = toy()
    assert [(n.name, n.depth) for n in p.modules()] == [("", 0), ("a", 1), ("a.x", 2), ("a.y", 2), ("b", 1)]
    # totals: forward 43 + backward 50 + other 2 = 95 FLOPs; 14 + 20 = 34 MACs
    assert (p.macs, p.flops) == (34, 95)
    assert (p.module("a").macs, p.module("a").flops) == (30, 83)
    assert (p.module("a").gap.macs, p.module("a").gap.flops) == (0, 3)  # 83 - (70 + 10)
    assert p.flops_per_s == 95 / 4.0 and p.forward_flops_per_s == 43 / 1.0
    with pytest.raises(KeyError, match="no module named 'zz'"):
        p.module("zz")


def test_exclusion_removes_the_cost_from_every_ancestor_phase_and_operator():
    p = toy(excluded={"a.x"})
    # a.x: fwd (10, 25) + bwd (20, 45) leave a and the root; phase totals drop by the same
    assert (p.module("a").phase("forward").flops, p.module("a").phase("backward").flops) == (8, 5)
    # root: forward 43 - 25 = 18, backward 50 - 45 = 5 FLOPs; MACs 14 - 10 = 4 and 20 - 20 = 0
    assert (p.root.macs, p.root.flops) == (4, 18 + 5)
    assert (p.phase("forward").flops, p.phase("backward").flops, p.phase("other").flops) == (18, 5, 2)
    assert (p.macs, p.flops) == (4, 25)
    assert p.by_operator["matmul"].as_dict() == {"macs": 4, "flops": 9, "calls": 1}  # a.x's 2 matmuls removed
    assert [n.name for n in p.excluded] == ["a.x"] and p.module("a.x").excluded
    assert p.module("a").gap.flops == 3  # the excluded child is not moved into the parent's own ops


def test_nested_exclusion_subtracts_once():
    p = toy(excluded={"a", "a.x"})
    assert [n.name for n in p.excluded] == ["a"]
    assert (p.phase("forward").flops, p.phase("backward").flops) == (10, 0)
    assert "relu" not in p.by_operator and "add" not in p.by_operator


def test_aggregation_reaches_the_deepest_level_and_ranks_by_type():
    p = toy()
    levels = p.aggregated(module_depth=-1, top_modules=2)
    assert [level["depth"] for level in levels] == [0, 1, 2]
    # depth 1: Block 83 FLOPs before Dense (b) 9; depth 2: Dense (a.x) 70, Act 10
    assert [(e["type"], e["value"]) for e in levels[1]["top"]["flops"]] == [("Block", 83), ("Dense", 9)]
    assert [(e["type"], e["value"]) for e in levels[2]["top"]["flops"]] == [("Dense", 70), ("Act", 10)]
    assert [(e["type"], e["value"]) for e in levels[2]["top"]["latency_s"]] == [("Dense", 0.4), ("Act", 0.1)]
    assert [level["depth"] for level in p.aggregated(module_depth=0)] == [0]
    assert [level["depth"] for level in p.aggregated(module_depth=9)] == [0, 1, 2]


def test_records_must_list_parents_first():
    with pytest.raises(ValueError, match="names the parent 'a'"):
        build_profile("M", "test", [record("", "M", None, 0, (0, 0)), record("a.x", "D", "a", 0, (0, 0))],
                      phases={}, by_operator={})


def test_dict_is_json_and_complete():
    data = json.loads(toy().to_json(module_depth=1, top_modules=1))
    assert (data["macs"], data["flops"], data["duration_s"]) == (34, 95, 4.0)
    assert [level["depth"] for level in data["aggregated"]] == [0, 1]
    assert data["tree"]["children"][0]["phases"]["backward"]["flops"] == 50
    assert data["outside"] == {"sum": {"macs": 0, "flops": 2, "calls": 1}}
    assert data["parallel"]["model_flops"] == 95


def test_formatting():
    assert fmt.count(144, "MACs") == "144 MACs"
    assert fmt.count(1234, "MACs") == "1.234 kMACs"
    assert fmt.count(22_360_000_000, "FLOPs") == "22.36 GFLOPs"
    assert fmt.count(61_710) == "61.71 k"
    assert fmt.count(1234, "MACs", as_string=False) == "1234"
    assert fmt.seconds(0.01235) == "12.35 ms" and fmt.seconds(None) == "n/a"
    assert fmt.rate(1.83e12) == "1.830 TFLOP/s"
    assert fmt.share(1, 3) == "33.33%" and fmt.share(1, 0) == "-"


def test_importing_the_package_imports_no_framework():
    code = ("import sys, deeplite_like, deeplite_like.profiling; "
            "assert deeplite_like.get_model_profile is deeplite_like.profiling.get_model_profile; "
            "print(sorted(m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=__file__.rsplit("/tests/", 1)[0])
    assert out.stdout.strip() == "[]"


def test_unsupported_model_type_is_named():
    import deeplite_like
    with pytest.raises(TypeError, match="no backend handles a model of type builtins.object"):
        deeplite_like.FlopsProfiler(object())
    with pytest.raises(TypeError, match="no backend handles"):
        deeplite_like.get_model_profile(object(), input_shape=(1, 2))
