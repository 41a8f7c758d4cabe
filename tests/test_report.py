"""The PAI-study report: its numbers against a direct xarray computation on a small cube, its files,
and the study commands (population, trace import, study-spec, report) on the command line."""

import re
from pathlib import Path

import hdf5plugin  # noqa: F401  (registers the blosc filter for reading)
import numpy as np
import pytest
import xarray as xr

import paigrid.datasets
from cli_helpers import assert_clean_error, run
from paigrid.errors import PaigridError
from paigrid.inputs.spec import load_spec, spec_from_dict
from paigrid.orchestration import run_sweep
from paigrid.schema import ARCH_IGNORES, FORMAT_VERSION
from paigrid.study import constants, report_figures
from paigrid.study import report as R
from paigrid.study.population import POPULATION_COLUMNS, synthetic_population
from paigrid.study.trace import write_population
from test_trace import Trace

STUDY_SPEC = Path(paigrid.datasets.__file__).parent / "pai_study.toml"
COMPONENTS = ("t_data", "t_flop", "t_mem", "t_comm")


def _row(job, model, arch, gpu, n, intra="pcie3", network="eth-25g", precision="fp32", batch=""):
    return {
        "job": job,
        "model": model,
        "batch": batch,
        "gpus_per_node": 8,
        "current_arch": arch,
        "current_gpu": gpu,
        "current_n_gpu": n,
        "current_intra": intra,
        "current_network": network,
        "current_precision": precision,
        "source": "test",
    }


# hand-made jobs that reach every scope and exclusion rule of the report
EXTRA = [
    _row("x-ps-t4", "resnet50", "ps-worker", "T4", 4),  # no NVLink server for a T4
    _row("x-ps-k80", "bert", "ps-worker", "K80", 8),  # no NVLink server, no FP16
    _row("x-ps-v100sxm", "transformer", "ps-worker", "V100-SXM2-16GB", 2, intra="nvlink2-hcm"),
    _row("x-ps-p100", "nmt", "ps-worker", "P100-PCIe-16GB", 8),
    _row("x-ps-big", "resnet50", "ps-worker", "V100-PCIe-16GB", 64),  # beyond one server
    _row("x-cluster", "bert", "allreduce-cluster", "V100-SXM2-32GB", 16, intra="nvlink2-hcm"),
    _row("x-eth100", "resnet50", "ps-worker", "P100-PCIe-16GB", 16, network="eth-100g"),  # not on 25 GbE
    _row("x-amp", "resnet50", "1w1g", "V100-SXM2-16GB", 1, intra="nvlink2-hcm", precision="amp-fp16"),
    _row("x-gpt2xl", "gpt2-xl", "allreduce-local", "V100-SXM2-32GB", 8, intra="nvlink2-hcm"),  # memory
    _row("x-a10", "resnet50", "1w1g", "A10", 1),  # current GPU not in the cube
]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A 60-job synthetic population plus the hand-made jobs, swept with the study spec."""
    folder = tmp_path_factory.mktemp("study")
    rows = synthetic_population(60, 5) + EXTRA
    write_population(rows, folder / "pop.csv")
    spec = load_spec(STUDY_SPEC)
    spec.workloads = str(folder / "pop.csv")
    run_sweep(spec, folder / "study.h5", progress=False)
    return folder


@pytest.fixture(scope="module")
def cube(study):
    return study / "study.h5"


@pytest.fixture(scope="module")
def numbers(cube):
    return R.compute_report(cube, block_jobs=7)  # a small block: several blocks, one of them partial


@pytest.fixture(scope="module")
def direct(cube):
    """Per-job values computed directly with xarray, by label, for every configuration the report uses."""
    with xr.open_dataset(cube, engine="h5netcdf") as data:
        ds = data.load()
    labels = {d: set(map(str, ds[d].values)) for d in constants.COORDS}

    def at(j, **coords):
        if any(str(v) not in labels[d] for d, v in coords.items()):
            return None
        point = ds.isel(job=j).sel(n_gpu=0, **coords)
        return {
            "step_time": float(point.step_time),
            "valid": int(point.invalid_reason) == 0,
            "fits": int(point.fits_memory),
            "bottleneck": int(point.bottleneck),
            **{c: float(point[c]) for c in COMPONENTS},
        }

    jobs = []
    for j in range(ds.sizes["job"]):
        cur = {d: str(ds[f"current_{d}"].values[j]) for d in constants.COORDS}
        job = {
            "cur": cur,
            "current": at(j, **cur),
            "one_server": at(j, **{**cur, "arch": "allreduce-local"}),
            "eth100": at(j, **{**cur, "network": "eth-100g"}),
            "amp": at(j, **{**cur, "precision": "amp-fp16"}),
        }
        sibling = constants.NVLINK_SERVER.get(cur["gpu"])
        job["nvlink"] = (
            at(j, **{**cur, "arch": "allreduce-local", "gpu": sibling[0], "intra": sibling[1]}) if sibling else None
        )
        ladder = "pcie" if cur["intra"].startswith("pcie") else "nvlink"
        for gen, (gpu, intra) in zip(constants.GENERATIONS, constants.GPU_LADDERS[ladder]):
            job[gen] = at(j, **{**cur, "gpu": gpu, "intra": intra})
        job["n_gpu"] = int(ds.current_n_gpu.values[j])
        job["archs"] = {a: at(j, **{**cur, "arch": a}) for a in labels["arch"]}
        job["designs"] = {
            (g, i, w): at(j, **{**cur, "gpu": g, "intra": i, "network": w})
            for g in labels["gpu"]
            for i in labels["intra"]
            for w in labels["network"]
        }
        jobs.append(job)
    return jobs


def usable(v):
    return v is not None and v["valid"] and v["fits"] == 1


def analysed(direct):
    return [j for j in direct if j["current"] is not None and j["current"]["valid"]]


# --- the numbers -----------------------------------------------------------------------------
def test_exclusions_of_current_configurations(numbers, direct):
    assert numbers["cube"]["jobs"] == 70
    assert numbers["excluded"]["current_not_in_cube"] == 1  # x-a10
    assert int(numbers["analysed"].sum()) == len(analysed(direct)) == 69


def test_breakdown_means_per_architecture(numbers, direct):
    for arch in (*numbers["archs"], "all"):
        jobs = [j for j in analysed(direct) if arch in ("all", j["cur"]["arch"])]
        assert numbers["breakdown"][arch]["jobs"] == len(jobs)
        for c in COMPONENTS:
            shares = [j["current"][c] / sum(j["current"][k] for k in COMPONENTS) for j in jobs]
            assert numbers["breakdown"][arch][c] == pytest.approx(np.mean(shares), rel=1e-6, abs=1e-12)
        assert sum(numbers["breakdown"][arch][c] for c in COMPONENTS) == pytest.approx(1.0)
    assert numbers["breakdown"]["1w1g"]["t_comm"] == 0.0
    assert set(numbers["archs"]) == {"1w1g", "1wng", "allreduce-local", "ps-worker", "allreduce-cluster"}


def test_step_time_is_the_sum_of_the_components(direct):
    for j in analysed(direct):
        assert j["current"]["step_time"] == pytest.approx(sum(j["current"][c] for c in COMPONENTS), rel=1e-5)


def test_comm_share_distribution(numbers, direct):
    for arch in (*numbers["archs"], "all"):
        expected = sorted(
            j["current"]["t_comm"] / sum(j["current"][c] for c in COMPONENTS)
            for j in analysed(direct)
            if arch in ("all", j["cur"]["arch"])
        )
        np.testing.assert_allclose(numbers["comm_share"][arch], expected, rtol=1e-6, atol=1e-12)


def test_bottleneck_counts(numbers, direct):
    for arch in (*numbers["archs"], "all"):
        codes = [j["current"]["bottleneck"] for j in analysed(direct) if arch in ("all", j["cur"]["arch"])]
        expected = {name: codes.count(k) for k, name in enumerate(constants.BOTTLENECKS)}
        assert numbers["bottlenecks"][arch] == expected
        assert sum(expected.values()) == numbers["breakdown"][arch]["jobs"]


def check_projection(proj, pairs, in_scope):
    """``pairs``: (baseline step time, target step time) of the jobs used."""
    speedup = np.array([b / t for b, t in pairs])
    assert proj["in_scope"] == in_scope
    assert proj["jobs"] == len(pairs) == in_scope - sum(proj["excluded"].values())
    np.testing.assert_allclose(np.sort(proj["speedup"]), np.sort(speedup), rtol=1e-6)
    assert proj["share_faster"] == pytest.approx(np.mean(speedup > 1.0))
    assert proj["mean"] == pytest.approx(np.mean(speedup), rel=1e-6)
    assert proj["median"] == pytest.approx(np.median(speedup), rel=1e-6)


def test_ps_worker_to_allreduce_nvlink(numbers, direct):
    ps = [j for j in analysed(direct) if j["cur"]["arch"] == "ps-worker"]
    one = [j for j in ps if j["one_server"]["valid"]]
    used = [j for j in one if j["nvlink"] is not None and usable(j["nvlink"])]
    proj = numbers["projections"]["ps_nvlink"]
    check_projection(proj, [(j["current"]["step_time"], j["nvlink"]["step_time"]) for j in used], len(one))
    assert proj["ps_worker_jobs"] == len(ps)
    assert proj["beyond_one_server"] == len(ps) - len(one) >= 2  # x-ps-big, x-eth100
    no_nvlink = [j for j in one if j["cur"]["gpu"] not in constants.NVLINK_SERVER]
    assert proj["excluded"].get("no NVLink server for this GPU") == len(no_nvlink) >= 2
    assert {"T4", "K80"} <= set(proj["gpus_without_nvlink"])
    faster = sum(j["current"]["step_time"] / j["nvlink"]["step_time"] > 1 for j in used)
    assert proj["share_faster_of_all_ps"] == pytest.approx(faster / len(ps))


def test_ethernet_25_to_100(numbers, direct):
    net = [j for j in analysed(direct) if j["cur"]["arch"] in ("ps-worker", "allreduce-cluster")]
    scope = [j for j in net if j["cur"]["network"] == "eth-25g"]
    used = [j for j in scope if usable(j["eth100"])]
    proj = numbers["projections"]["ethernet"]
    check_projection(proj, [(j["current"]["step_time"], j["eth100"]["step_time"]) for j in used], len(scope))
    assert proj["other_network"] == 1  # x-eth100
    assert all(s >= 1.0 - 1e-6 for s in proj["speedup"])  # more bandwidth is never slower


def test_fp32_to_mixed_precision(numbers, direct):
    scope = [j for j in analysed(direct) if j["cur"]["precision"] == "fp32"]
    used = [j for j in scope if usable(j["amp"])]
    proj = numbers["projections"]["amp"]
    check_projection(proj, [(j["current"]["step_time"], j["amp"]["step_time"]) for j in used], len(scope))
    assert proj["other_precision"] == 1  # x-amp
    k80 = sum(j["cur"]["gpu"] == "K80" for j in scope)
    assert proj["excluded"]["unsupported"] == k80 >= 1


def test_gpu_generation_upgrades(numbers, direct):
    steps = numbers["projections"]["gpu"]["steps"]
    assert list(steps) == ["P100->V100", "V100->A100", "A100->H100", "P100->H100"]
    jobs = analysed(direct)
    for key, proj in steps.items():
        old, new = key.split("->")
        used = [j for j in jobs if usable(j[old]) and usable(j[new])]
        check_projection(proj, [(j[old]["step_time"], j[new]["step_time"]) for j in used], len(jobs))
    # gpt2-xl (1.5 B parameters, Adam) fits on no 16/40 GB ladder GPU at 8 GPUs of fp32 allreduce-local
    assert sum(steps["P100->V100"]["excluded"].values()) >= 1
    assert any("GPU memory on the" in k for k in steps["P100->V100"]["excluded"])


def test_headline_rows_come_from_the_numbers(numbers):
    rows = {r["what"]: r for r in numbers["headline"]}
    comm_share = numbers["breakdown"]["all"]["t_comm"]
    assert rows["communication share of step time, mean over all jobs"]["paigrid"] == comm_share
    ps = numbers["projections"]["ps_nvlink"]
    ps_row = rows["PS/Worker jobs faster on AllReduce-NVLink (jobs that fit in one server)"]
    assert ps_row["paigrid"] == ps["share_faster"]
    assert rows["mean speedup from 25 to 100 Gb/s Ethernet"]["paigrid"] == numbers["projections"]["ethernet"]["mean"]
    assert [r["paper"] for r in numbers["headline"]].count(0.62) == 2


def test_block_size_does_not_change_the_numbers(cube, numbers):
    other = R.compute_report(cube, block_jobs=1000)
    assert other["breakdown"] == numbers["breakdown"]
    assert other["projections"]["ethernet"]["mean"] == numbers["projections"]["ethernet"]["mean"]


def test_gather_reads_validity_of_every_cube_format(small_cube):
    """The report reads ``valid`` from a format-1 cube (paigrid 0.1.0) and ``invalid_reason``
    from a cube written now (conftest's ``small_cube``: the format-1 spec swept with pai-v1, the
    model of paigrid 0.1.0): the same sweep gives the same gathered values either way."""
    from paigrid.cube import open_cube

    format1 = Path(__file__).parent / "data" / "format1"
    old, new = open_cube(format1 / "cube.h5"), open_cube(small_cube)
    try:
        assert (old.format, new.format) == (1, FORMAT_VERSION)
        n_jobs = len(old.labels["job"])
        sizes = [len(old.labels[d]) for d in constants.COORDS]
        every = np.array(np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij")).reshape(5, -1).T
        coords = {f"c{k}": np.tile(c, (n_jobs, 1)) for k, c in enumerate(every)}
        got_old, got_new = R.gather(old, coords, block_jobs=3), R.gather(new, coords, block_jobs=3)
    finally:
        old.close()
        new.close()
    valid = np.array([got_old[name]["valid"] for name in coords])
    assert valid.any() and not valid.all()
    for name in coords:
        for variable, values in got_old[name].items():
            np.testing.assert_array_equal(got_new[name][variable], values, err_msg=f"{name} {variable}")


# --- the files -------------------------------------------------------------------------------
def test_report_files(cube, numbers, tmp_path):
    md_path = R.write_report(cube, tmp_path / "rep")
    text = md_path.read_text()
    pngs = {p.name for p in (tmp_path / "rep").glob("*.png")}
    linked = set(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text))
    assert pngs == linked == set(report_figures.FIGURES.values())
    for name in pngs:
        assert (tmp_path / "rep" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the headline numbers as printed
    assert constants.pct(numbers["breakdown"]["all"]["t_comm"]) in text
    assert constants.pct(numbers["projections"]["ps_nvlink"]["share_faster"]) in text
    assert constants.times(numbers["projections"]["ethernet"]["mean"]) in text
    assert "| 62.0% |" in text and "| 60.0% |" in text and "| 1.70x |" in text
    # no temporary folder left behind; a second run replaces the files in place
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]
    R.write_report(cube, tmp_path / "rep")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_a_failed_report_writes_nothing(tmp_path):
    with pytest.raises(PaigridError, match="no cube"):
        R.write_report(tmp_path / "missing.h5", tmp_path / "rep")
    assert list(tmp_path.iterdir()) == []


# --- the command line ------------------------------------------------------------------------


def test_cli_population(tmp_path):
    result = run("population", "--jobs", 40, "--seed", 3, "--out", tmp_path / "pop.csv")
    assert result.exit_code == 0, result.output
    assert "40 jobs" in result.stderr and "ps-worker" in result.stderr
    lines = (tmp_path / "pop.csv").read_text().splitlines()
    assert lines[0] == ",".join(POPULATION_COLUMNS) and len(lines) == 41
    again = run("population", "--jobs", 40, "--seed", 3, "--out", tmp_path / "again.csv")
    assert again.exit_code == 0
    assert (tmp_path / "again.csv").read_text() == (tmp_path / "pop.csv").read_text()


def test_cli_population_bad_input(tmp_path):
    assert_clean_error(run("population", "--jobs", 5, "--out", tmp_path / "nowhere" / "p.csv"), "does not exist")
    assert_clean_error(run("population", "--jobs", 5, "--out", tmp_path), "is a folder")
    assert run("population", "--jobs", 0, "--out", tmp_path / "p.csv").exit_code != 0
    assert not (tmp_path / "p.csv").exists()


def _trace(folder):
    t = Trace(folder)
    t.job("j1w1g", [("worker", "1", "100", "P100")], workload="bert")
    t.job("jps", [("ps", "2", "", ""), ("worker", "4", "100", "V100")], workload="ctr")
    t.job("jcluster", [("worker", "3", "100", "T4"), ("chief", "1", "100", "T4")], workload="graphlearn")
    t.job("jfailed", [("worker", "1", "100", "V100")], status="Failed")
    return t.write()


def test_cli_trace_import_then_sweep_and_report(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    result = run("trace", "import", _trace(folder), "--out", tmp_path / "pop.csv")
    assert result.exit_code == 0, result.output
    assert "imported: 3" in result.stderr and "skipped_failed: 1" in result.stderr
    assert len((tmp_path / "pop.csv").read_text().splitlines()) == 4
    assert run("study-spec", "--out", tmp_path / "study.toml").exit_code == 0
    swept = run("sweep", tmp_path / "study.toml", "--workloads", tmp_path / "pop.csv", "--out", tmp_path / "c.h5", "-q")
    assert swept.exit_code == 0, swept.output
    reported = run("report", tmp_path / "c.h5", "--out", tmp_path / "rep")
    assert reported.exit_code == 0, reported.output
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "**3 jobs analysed**" in text and "allreduce-cluster" in text


def test_cli_trace_import_bad_input(tmp_path):
    assert_clean_error(run("trace", "import", tmp_path / "none", "--out", tmp_path / "p.csv"), "does not exist")
    folder = _trace(tmp_path)
    (folder / "pai_task_table.csv").unlink()
    assert_clean_error(run("trace", "import", folder, "--out", tmp_path / "p.csv"), "pai_task_table.csv")
    (folder / "pai_task_table.csv").write_text("jps,worker,1\n")
    assert_clean_error(run("trace", "import", folder, "--out", tmp_path / "p.csv"), "pai_task_table.csv")
    assert not (tmp_path / "p.csv").exists()


def test_cli_study_spec(tmp_path):
    result = run("study-spec", "--out", tmp_path / "s.toml")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "s.toml").read_text() == STUDY_SPEC.read_text()
    spec = load_spec(tmp_path / "s.toml")
    assert spec.n_gpu == "current" and spec.workloads is None
    assert {"eth-25g", "eth-100g"} == set(spec.network) and {"fp32", "amp-fp16"} == set(spec.precision)
    printed = run("study-spec")
    assert printed.exit_code == 0 and printed.stdout == STUDY_SPEC.read_text()
    assert_clean_error(run("study-spec", "--out", tmp_path / "no" / "s.toml"), "does not exist")


def test_cli_report(cube, tmp_path):
    result = run("report", cube, "--out", tmp_path / "rep")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "rep" / "report.md").exists()
    help_text = " ".join(run("report", "--help").output.split())
    assert " ".join(constants.SWEEP_COMMAND.split()) in help_text


def test_cli_report_bad_input(study, tmp_path):
    assert_clean_error(run("report", tmp_path / "missing.h5", "--out", tmp_path / "rep"), "no cube")
    (tmp_path / "junk.h5").write_text("not hdf5")
    assert_clean_error(run("report", tmp_path / "junk.h5", "--out", tmp_path / "rep"), "not a readable HDF5")
    assert_clean_error(run("report", study / "study.h5", "--out", study / "pop.csv"), "is a file")
    # a cube swept over explicit GPU counts has no "current" n_gpu: the report says what to do
    spec = spec_from_dict(
        {"grid": {"gpu": ["V100"], "n_gpu": [1, 8], "network": ["eth-25g"], "precision": ["fp32"]}}, "test"
    )
    spec.workloads = str(study / "pop.csv")
    run_sweep(spec, tmp_path / "counts.h5", progress=False)
    assert_clean_error(
        run("report", tmp_path / "counts.h5", "--out", tmp_path / "rep"), 'n_gpu = "current"', "study-spec"
    )
    # a reduce-only cube has no cube variables
    spec = load_spec(STUDY_SPEC)
    spec.workloads = str(study / "pop.csv")
    run_sweep(spec, tmp_path / "reduced.h5", progress=False, reduce_only=True)
    assert_clean_error(run("report", tmp_path / "reduced.h5", "--out", tmp_path / "rep"), "reduce-only")
    assert not (tmp_path / "rep").exists()


# --- the study in the report: the paper's variants, the page, designs, bands ------------------
def _analysed_population(study, numbers):
    """The population CSV's jobs that the report analyses, as ``paper.Population``."""
    from paigrid.study import paper as P

    from_csv = P.Population(str(study / "pop.csv"))
    names = {str(n) for n, a in zip(numbers["cube"]["job_names"], numbers["analysed"]) if a}
    return P.Population(jobs=[j for j in from_csv.jobs if j.name in names], cats=from_csv.cats)


def test_paper_figures_from_the_cube_equal_those_of_the_population(study, numbers):
    """The report predicts the variants for the jobs the cube records; the same jobs read from the
    population CSV give the same numbers, and its version-1 step times are the cube's."""
    from paigrid.study import paper as P

    pop = _analysed_population(study, numbers)
    assert len(pop.jobs) == int(numbers["analysed"].sum()) == 69
    direct = P.compute_paper(pop)
    assert P.render_paper(numbers["paper"]) == P.render_paper(direct)
    assert numbers["paper"]["figures"]["base"]["ps_comm_share"] == direct["figures"]["base"]["ps_comm_share"]
    cube_times = numbers["current"]["step_time"][numbers["analysed"]]
    np.testing.assert_allclose(numbers["paper"]["figures"]["base"]["current"]["step_time"], cube_times, rtol=1e-6)


def _bench_study():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "bench" / "study.py"
    spec = importlib.util.spec_from_file_location("bench_study", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_study_page_is_the_report(cube, numbers, tmp_path):
    """bench/study.py writes the page from report.md alone: every number of the report, the paper's
    variants and the cluster designs included, is on the page as the report prints it."""
    bench = _bench_study()
    text = R.write_report(cube, tmp_path / "rep").read_text()
    page = bench.page(text, ["| `paigrid report` | 1.0 s | 1 MB | wrote |"], 70, 5)
    assert bench.report_section(text) in page
    from paigrid.study.paper import render_paper

    paper = render_paper(numbers["paper"]).split("\n", 1)[1].strip()
    assert bench.report_section(paper) in page  # the paper section, headings one level down
    top = numbers["designs"]["designs"][0]
    assert " / ".join(top["design"].values()) in page and f"{top['current']['cost']:,.0f}" in page
    assert "### 4. The paper's figures, one mechanism at a time" in page and "placement bracket" in page
    assert "(figures/study/designs_pareto.png)" in page


def test_best_architecture_and_its_ties(numbers, direct):
    best = numbers["best_arch"]
    band = numbers["job_band"]
    ties = changes = jobs = 0
    for k, j in enumerate(direct):
        if not (j["current"] is not None and j["current"]["valid"]):
            continue
        times = sorted(v["step_time"] for v in j["archs"].values() if v is not None and v["valid"] and v["fits"] != 0)
        if not times:
            continue
        jobs += 1
        changes += j["current"]["step_time"] > times[0]  # another architecture is faster than its own
        ties += len(times) > 1 and times[1] <= times[0] * (1 + band[k])
    assert (best["jobs"], best["not_current"], best["tied"]) == (jobs, changes, ties)
    assert 0 < ties < jobs


def test_design_totals_by_hand(cube, numbers, direct):
    """Each design's cost, GPU-hours and faster share at the current count, from the cube read by label."""
    d = numbers["designs"]
    with xr.open_dataset(cube, engine="h5netcdf") as data:
        price = {str(g): float(p) for g, p in zip(data.gpu.values, data.price.values)}
        power = {str(g): float(p) for g, p in zip(data.gpu.values, data.power.values)}
    jobs = [j for j in direct if j["current"] is not None and j["current"]["valid"]]
    assert d["today"]["gpu_hours"] == sum(int(j["n_gpu"]) for j in jobs)
    for row in d["designs"]:
        design = row["design"]
        cost = gh = faster = ran = 0.0
        for j in jobs:
            v = j["designs"].get(tuple(design.values()))
            if v is None or not v["valid"] or v["fits"] != 1:
                continue
            ran += 1
            hours = j["n_gpu"] * v["step_time"] / j["current"]["step_time"]
            gh += hours
            cost += hours * price[design["gpu"]]
            faster += v["step_time"] < j["current"]["step_time"]
        assert row["jobs"] == ran and row["cannot_run"] == len(jobs) - ran
        assert row["current"]["gpu_hours"] == pytest.approx(gh, rel=1e-6)
        assert row["current"]["cost"] == pytest.approx(cost, rel=1e-6)
        assert row["current"]["energy_kWh"] == pytest.approx(gh * power[design["gpu"]] / 1000, rel=1e-6)
        if ran:
            assert row["faster"] == pytest.approx(faster / ran)
        assert row["cheapest"]["gpu_hours"] <= row["current"]["gpu_hours"] * (1 + 1e-9) or row["cannot_run"]
    keys = [(r["cannot_run"], r["current"]["cost"]) for r in d["designs"]]
    assert keys == sorted(keys)
    # only designs some job can run: no NVLink intra link on a PCIe card
    assert all(
        not (r["design"]["gpu"].endswith("PCIe-16GB") and r["design"]["intra"].startswith("nvswitch"))
        for r in d["designs"]
    )


def test_cheapest_count_of_one_job_by_hand(study, numbers):
    """A multi-GPU job's cheapest count on the top design, predicted by hand at every candidate count."""
    from paigrid.predict import predict_configs
    from paigrid.study import paper as P

    pop = _analysed_population(study, numbers)
    top = numbers["designs"]["designs"][0]["design"]
    k = next(i for i, j in enumerate(pop.jobs) if j.current["arch"] == "ps-worker" and j.current["n_gpu"] == 8)
    job = pop.jobs[k]
    (today,) = predict_configs([job], [job.current], pop.cats, pop.eff, pop.options)
    candidates = {}
    for n in (1, 2, 4, 8):
        config = {**job.current, **top, "n_gpu": n, **({"arch": "1w1g"} if n == 1 else {})}
        (r,) = predict_configs([job], [config], pop.cats, pop.eff, pop.options)
        if r["valid"] and r["fits_memory"] == 1:
            candidates[n] = 8 * r["step_time"] / today["step_time"]
    from paigrid.study.designs import cheapest_counts

    got = cheapest_counts(
        P.Population(jobs=[job], cats=pop.cats, options=pop.options), [top], np.array([today["step_time"]])
    )
    at_eight = candidates.pop(8)
    best = min(candidates, key=candidates.get)
    assert got["n_gpu"][0, 0] == best and got["gpu_hours"][0, 0] == pytest.approx(candidates[best], rel=1e-6)
    assert at_eight >= candidates[best]  # more GPUs never cost fewer GPU-hours in version 1


def test_pareto_front_is_not_dominated(numbers):
    d = numbers["designs"]
    fewest = min(r["cannot_run"] for r in d["designs"])
    points = [
        (r[kind]["cost"], r[kind]["job_hours"])
        for r in d["designs"]
        if r["cannot_run"] == fewest
        for kind in ("current", "cheapest")
    ]
    front = [(d["designs"][k][kind]["cost"], d["designs"][k][kind]["job_hours"]) for k, kind in d["pareto"]]
    assert front
    for c, h in front:
        assert not any(c2 <= c and h2 <= h and (c2, h2) != (c, h) for c2, h2 in points)
    for c, h in points:
        assert (c, h) in front or any(c2 <= c and h2 <= h for c2, h2 in front)


def test_design_ties_by_hand(numbers, direct):
    d = numbers["designs"]
    band = numbers["job_band"]
    with xr.open_dataset(numbers["cube"]["path"], engine="h5netcdf") as data:
        price = {str(g): float(p) for g, p in zip(data.gpu.values, data.price.values)}
    ties = jobs = 0
    for k, j in enumerate(direct):
        if not (j["current"] is not None and j["current"]["valid"]):
            continue
        # designs that differ only in a dimension the job's architecture ignores are one design to it
        ignored = ARCH_IGNORES.get(j["cur"]["arch"], ())
        distinct = {}
        for (g, i, w), v in j["designs"].items():
            if v is not None and v["valid"] and v["fits"] == 1:
                key = tuple(x for d, x in zip(("gpu", "intra", "network"), (g, i, w)) if d not in ignored)
                distinct.setdefault(key, j["n_gpu"] * v["step_time"] / j["current"]["step_time"] * price[g])
        costs = sorted(distinct.values())
        if costs:
            jobs += 1
            ties += len(costs) > 1 and costs[1] <= costs[0] * (1 + band[k])
    assert (d["ties"]["jobs"], d["ties"]["tied"]) == (jobs, ties)


def test_bands_combine_as_documented():
    from paigrid.study import bands as B

    model = B.ErrorModel(correlated=True, n_draws=50)
    e = model.errors(["bert", "bert", "gcn"], ["T4", "T4", "T4"], [0.1, 0.2, 0.1])
    np.testing.assert_allclose(e[:, 1], np.maximum(2 * e[:, 0], -0.9))  # one z per workload and GPU
    assert not np.allclose(e[:, 0], e[:, 2])
    # a ratio of two predictions on the same GPU and band: no band when correlated, one when independent
    args = (["bert"] * 3, ["T4"] * 3, ["T4"] * 3, [0.2] * 3, [0.2] * 3, [2.0, 3.0, 4.0], [1.0, 1.0, 2.0], np.mean)
    assert B.speedup_band(B.ErrorModel(correlated=True), *args) == pytest.approx((7 / 3, 7 / 3))  # mean of 2, 3, 2
    low, high = B.speedup_band(B.ErrorModel(correlated=False), *args)
    assert low < 7 / 3 < high
    # totals: correlated within a group, independent across groups; and every error of one sign
    t = B.total_band(np.array([10.0, 10.0, 30.0]), np.array([0.1, 0.1, 0.2]), ["a", "a", "b"])
    assert t["correlated"] == pytest.approx(np.hypot(2.0, 6.0)) and t["same_sign"] == pytest.approx(8.0)
    assert B.fallback_band(np.array([np.nan, 0.3, 0.2])) == 0.3


def test_headline_bands_and_the_fallback(numbers):
    multi_server = [(n > 8) for n, a in zip(numbers["current"]["n_gpu"], numbers["analysed"]) if a]
    assert numbers["bands"]["fallback_jobs"] == sum(multi_server) > 0
    for row in numbers["headline"]:
        for key in ("band_correlated", "band_independent"):
            low, high = row[key]
            assert low <= row["paigrid"] + 1e-12 and row["paigrid"] <= high + 1e-12, (row["what"], key)
    eth = next(r for r in numbers["headline"] if "Ethernet" in r["what"])
    assert eth["band_correlated"] == pytest.approx((eth["paigrid"], eth["paigrid"]))  # same GPU: cancels
    assert eth["band_independent"][1] > eth["band_independent"][0]


def test_cli_default_family_is_counted_in_the_report(tmp_path):
    """Jobs that take the trace importer's default family are marked in the population, and the
    report of the cube swept from it counts them."""
    folder = tmp_path / "trace"
    folder.mkdir()
    t = Trace(folder)
    t.job("jtag", [("worker", "1", "100", "P100")], workload="bert")
    t.job("jnotag", [("worker", "1", "100", "V100")])
    t.job("jodd", [("worker", "1", "100", "T4")], workload="unheard-of")
    t.write()
    result = run("trace", "import", folder, "--out", tmp_path / "pop.csv", "--default-family", "gcn")
    assert result.exit_code == 0, result.output
    assert "model_default: 2" in result.stderr
    text = (tmp_path / "pop.csv").read_text()
    assert text.count(",gcn,") == 2 and text.count("(default family)") == 2
    assert_clean_error(
        run("trace", "import", folder, "--out", tmp_path / "p2.csv", "--default-family", "nope"),
        "unknown default family",
    )
    assert run("study-spec", "--out", tmp_path / "study.toml").exit_code == 0
    swept = run("sweep", tmp_path / "study.toml", "--workloads", tmp_path / "pop.csv", "--out", tmp_path / "c.h5", "-q")
    assert swept.exit_code == 0, swept.output
    assert run("report", tmp_path / "c.h5", "--out", tmp_path / "rep").exit_code == 0
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "2 job(s) took the trace importer's default family" in report
    # once the population file has changed, the report says it cannot count them
    (tmp_path / "pop.csv").write_text(text.replace("gcn", "bert"))
    assert run("report", tmp_path / "c.h5", "--out", tmp_path / "rep").exit_code == 0
    assert "has changed since the sweep" in (tmp_path / "rep" / "report.md").read_text()


def test_cli_population_with_llm_jobs(tmp_path):
    result = run(
        "population",
        "--jobs",
        40,
        "--seed",
        3,
        "--llm-share",
        0.25,
        "--llm-pretrain-share",
        0.5,
        "--out",
        tmp_path / "pop.csv",
    )
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "pop.csv").read_text().splitlines()
    llm = [line for line in lines if line.startswith("llm-3-")]
    assert len(lines) == 41 and len(llm) == 10
    assert sum(",allreduce-cluster," in line for line in llm) >= 5  # the pre-training half runs 64+ GPUs
    assert run("population", "--jobs", 5, "--llm-share", 2, "--out", tmp_path / "bad.csv").exit_code != 0
    assert not (tmp_path / "bad.csv").exists()


def test_a_cube_with_llm_jobs_says_they_are_not_in_the_study(tmp_path):
    rows = [
        _row("dp-ps", "resnet50", "ps-worker", "V100-PCIe-16GB", 4),
        _row("dp-1", "resnet50", "1w1g", "V100-SXM2-16GB", 1, intra="nvlink2-hcm"),
        _row("llm-8b", "llama3-8b", "allreduce-local", "H100-SXM5-80GB", 8, intra="nvswitch-nvlink4"),
    ]
    write_population(rows, tmp_path / "pop.csv")
    spec = load_spec(STUDY_SPEC)
    spec.workloads = str(tmp_path / "pop.csv")
    run_sweep(spec, tmp_path / "mixed.h5", progress=False)
    numbers = R.compute_report(tmp_path / "mixed.h5")
    assert numbers["cube"]["jobs"] == 2 and numbers["cube"]["llm_jobs"] == 1
    text = R.write_report(tmp_path / "mixed.h5", tmp_path / "rep").read_text()
    assert "also holds 1 LLM-family job(s)" in text
