"""The benchmark suite: how it summarises runs, and ``bench/run.py --quick`` end to end.

No timings are asserted. The pure tests pin how samples become medians,
spreads, per-run ratios and noise notes; the smoke run checks that the suite
runs, interleaves every tree in every run and writes every field it promises.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.daemon_harness import require_fuse

RUNNER = Path(__file__).resolve().parent.parent / "bench" / "run.py"


def load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("memfs_bench_run", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench = load_runner()
GREP = f"grep -r ({bench.QUICK.files} files), second pass"
CREATE = f"create {bench.QUICK.creates} files"


def test_full_suite_runs_at_least_seven_times_by_default() -> None:
    assert bench.RUNS >= 7


def test_tree_order_puts_every_tree_first_once_in_as_many_runs_as_trees() -> None:
    trees = list(bench.TREES)
    orders = [bench.tree_order(trees, run, group=2) for run in range(len(trees))]
    assert all(sorted(order) == sorted(trees) for order in orders)
    assert {order[0] for order in orders} == set(trees)
    assert {order[-1] for order in orders} == set(trees)


def test_ratio_is_the_median_of_per_run_ratios_not_a_ratio_of_medians() -> None:
    res = bench.Results()
    for run, (memfs, floor) in enumerate([(1.0, 1.0), (3.0, 2.0), (2.0, 1.0)]):
        res.add(GREP, "memfs", memfs, run)
        res.add(GREP, "pyfuse3 floor", floor, run)
    found = res.ratio(GREP, "memfs", "pyfuse3 floor")
    assert found.samples == (1.0, 1.5, 2.0)
    assert (found.median, found.low, found.high) == (1.5, 1.0, 2.0)
    assert res.median(GREP, "memfs") / res.median(GREP, "pyfuse3 floor") == 2.0  # not 1.5


def test_a_spread_over_the_threshold_is_noted_and_marked() -> None:
    res = bench.Results()
    noisy = [1.0, 1.0 + bench.NOISY_SPREAD * 2, 1.0]
    quiet = [1.0, 1.0 + bench.NOISY_SPREAD / 2, 1.0]
    for run in range(3):
        res.add(GREP, "native", quiet[run], run)
        res.add(GREP, "fuse-overlayfs", noisy[run], run)
    assert not res.spread(GREP, "native").noisy
    assert res.spread(GREP, "fuse-overlayfs").noisy
    notes = bench.noise_notes(res, bench.QUICK)
    assert any(note.startswith(f"{GREP}: fuse-overlayfs spread") for note in notes)
    assert not any(f"{GREP}: native" in note for note in notes)
    table, _ = bench.report(res, bench.QUICK, 3, overlay=True, quick=True)
    assert "Noisy (spread over 25% of the median" in table
    assert bench.cell(res.spread(GREP, "fuse-overlayfs")).endswith(" *")


def test_one_sample_is_never_noisy() -> None:
    assert not bench.Spread.of([5.0]).noisy


def test_floor_target_says_every_run_median_only_or_no() -> None:
    target = bench.FLOOR_TARGET
    assert bench.meets(bench.Spread.of([1.0, 1.1, target]), target) == "yes, every run"
    assert bench.meets(bench.Spread.of([1.0, 1.1, target + 0.1]), target) == "median only"
    assert bench.meets(bench.Spread.of([1.0, target + 0.1, target + 0.2]), target) == "no"


def test_floor_ratios_are_reported_on_read_workloads_only() -> None:
    res = bench.Results()
    for tree in bench.TREES:
        res.add(GREP, tree, 1.0, 0)
        res.add(CREATE, tree, 1.0, 0)
    assert set(bench.workload_ratios(res, GREP)) == {
        "memfs / pyfuse3 floor",
        "pyfuse3 floor / native",
        "pyfuse3 floor / fuse-overlayfs",
        "memfs / fuse-overlayfs",
        "memfs / native",
    }
    assert set(bench.workload_ratios(res, CREATE)) == {"memfs / fuse-overlayfs", "memfs / native"}


def test_bench_quick_runs(tmp_path: Path) -> None:
    require_fuse()
    if shutil.which("fuse-overlayfs") is None and not os.environ.get("CI"):
        pytest.skip("fuse-overlayfs is missing and CI is unset (apt-get install -y fuse-overlayfs)")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(RUNNER), "--quick", "--runs", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "| grep -r" in done.stdout
    assert "| workload | native | fuse-overlayfs | pyfuse3 floor | memfs |" in done.stdout
    assert "| workload | memfs / pyfuse3 floor | ≤ 1.15x? | pyfuse3 floor / native |" in done.stdout
    assert "| FUSE requests memfs served (last run) |" in done.stdout
    assert "skipped" not in done.stdout.split("| workload")[1].split("\n")[2]
    assert (out / "table.md").read_text().strip() in done.stdout

    data = json.loads((out / "results.json").read_text())
    assert data["runs"] == 2
    assert (data["noisy_spread"], data["floor_target"]) == (0.25, 1.15)
    assert isinstance(data["notes"], list)
    rows = {row["workload"]: row for row in data["workloads"]}
    grep = rows[GREP]
    assert set(grep["trees"]) == set(bench.TREES)
    for stats in grep["trees"].values():
        assert len(stats["samples"]) == 2
        assert stats["min"] <= stats["median"] <= stats["max"]
        assert {"spread", "noisy"} <= set(stats)
    # Every tree in every run, and the order differs between runs.
    assert [sorted(order) for order in grep["order"]] == [sorted(bench.TREES)] * 2
    assert grep["order"][0] != grep["order"][1]
    assert grep["ratios"]["memfs / pyfuse3 floor"]["meets"] in (
        "yes, every run",
        "median only",
        "no",
    )
    assert len(grep["ratios"]["pyfuse3 floor / native"]["samples"]) == 2
    assert len(grep["ratios"]["pyfuse3 floor / fuse-overlayfs"]["samples"]) == 2
    assert "pyfuse3 floor" not in rows[CREATE]["trees"]
    assert set(rows[CREATE]["ratios"]) == {"memfs / fuse-overlayfs", "memfs / native"}
    assert all(len(turn["copy mode / memfs"]["samples"]) == 2 for turn in data["turns"])


def test_the_web_bench_times_every_page_it_names_and_writes_its_table(tmp_path: Path) -> None:
    script = RUNNER.with_name("web.py")
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            "--changes",
            "3",
            "--files",
            "20",
            "--runs",
            "2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    samples = json.loads((tmp_path / "web.json").read_text())
    assert set(samples) == {"review page", "review API", "map page", "org space page", "spaces API"}
    assert all(len(times) == 2 and all(t > 0 for t in times) for times in samples.values())
    table = (tmp_path / "web.md").read_text()
    assert "3 waiting changes; a 20-file space" in table and "| map page |" in table


def load_instructions() -> ModuleType:
    sys.path.insert(0, str(RUNNER.parent))  # it imports bench/run.py as ``run``, as a script does
    try:
        spec = importlib.util.spec_from_file_location(
            "memfs_bench_instructions", RUNNER.with_name("instructions.py")
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(RUNNER.parent))


def test_the_instruction_count_is_the_whole_process_total_callgrind_wrote(tmp_path: Path) -> None:
    instructions = load_instructions()
    out = tmp_path / "callgrind.out"
    out.write_text("version: 1\nevents: Ir\nfn=main\n5 7\nsummary: 4052113\n")
    assert instructions.totals(out) == 4052113
    out.write_text("version: 1\nevents: Ir\n")  # cut off before its totals: no figure made up
    with pytest.raises(RuntimeError, match="no totals"):
        instructions.totals(out)


def test_another_tree_counted_beside_this_one_runs_its_own_code(tmp_path: Path) -> None:
    instructions = load_instructions()
    other = tmp_path / "older"
    env = instructions.tree_env(other)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(other), str(other / ".typecheck")]
    assert instructions.tree_env(instructions.HERE).get("PYTHONPATH") == os.environ.get(
        "PYTHONPATH"
    )


def test_instructions_count_a_space_of_one_file_and_refuse_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    instructions = load_instructions()
    assert instructions.parse([]).files == 1000
    assert instructions.parse(["--files", "1"]).files == 1
    with pytest.raises(SystemExit) as exit_info:
        instructions.parse(["--files", "0"])
    assert exit_info.value.code == 2
    assert "--files must be 1 or more" in capsys.readouterr().err
