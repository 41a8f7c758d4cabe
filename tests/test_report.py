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
from paigrid.schema import FORMAT_VERSION
from paigrid.study import common, report_figures
from paigrid.study import report as R
from paigrid.study.population import POPULATION_COLUMNS, synthetic_population
from paigrid.study.trace import write_population
from paigrid.sweeping import run_sweep
from test_trace import Trace

STUDY_SPEC = Path(paigrid.datasets.__file__).parent / "pai_study.toml"
COMPONENTS = ("t_data", "t_flop", "t_mem", "t_comm")


def _row(job, model, arch, gpu, n, intra="pcie3", network="eth-25g", precision="fp32", batch=""):
    return {"job": job, "model": model, "batch": batch, "gpus_per_node": 8, "current_arch": arch,
            "current_gpu": gpu, "current_n_gpu": n, "current_intra": intra, "current_network": network,
            "current_precision": precision, "source": "test"}


# hand-made jobs that reach every scope and exclusion rule of the report
EXTRA = [
    _row("x-ps-t4", "resnet50", "ps-worker", "T4", 4),                       # no NVLink server for a T4
    _row("x-ps-k80", "bert", "ps-worker", "K80", 8),                         # no NVLink server, no FP16
    _row("x-ps-v100sxm", "transformer", "ps-worker", "V100-SXM2-16GB", 2, intra="nvlink2-hcm"),
    _row("x-ps-p100", "nmt", "ps-worker", "P100-PCIe-16GB", 8),
    _row("x-ps-big", "resnet50", "ps-worker", "V100-PCIe-16GB", 64),          # beyond one server
    _row("x-cluster", "bert", "allreduce-cluster", "V100-SXM2-32GB", 16, intra="nvlink2-hcm"),
    _row("x-eth100", "resnet50", "ps-worker", "P100-PCIe-16GB", 16, network="eth-100g"),  # not on 25 GbE
    _row("x-amp", "resnet50", "1w1g", "V100-SXM2-16GB", 1, intra="nvlink2-hcm", precision="amp-fp16"),
    _row("x-gpt2xl", "gpt2-xl", "allreduce-local", "V100-SXM2-32GB", 8, intra="nvlink2-hcm"),  # memory
    _row("x-a10", "resnet50", "1w1g", "A10", 1),                             # current GPU not in the cube
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
    labels = {d: set(map(str, ds[d].values)) for d in common.COORDS}

    def at(j, **coords):
        if any(str(v) not in labels[d] for d, v in coords.items()):
            return None
        point = ds.isel(job=j).sel(n_gpu=0, **coords)
        return {"step_time": float(point.step_time), "valid": int(point.invalid_reason) == 0,
                "fits": int(point.fits_memory), "bottleneck": int(point.bottleneck),
                **{c: float(point[c]) for c in COMPONENTS}}

    jobs = []
    for j in range(ds.sizes["job"]):
        cur = {d: str(ds[f"current_{d}"].values[j]) for d in common.COORDS}
        job = {"cur": cur, "current": at(j, **cur),
               "one_server": at(j, **{**cur, "arch": "allreduce-local"}),
               "eth100": at(j, **{**cur, "network": "eth-100g"}),
               "amp": at(j, **{**cur, "precision": "amp-fp16"})}
        sibling = common.NVLINK_SERVER.get(cur["gpu"])
        job["nvlink"] = at(j, **{**cur, "arch": "allreduce-local", "gpu": sibling[0], "intra": sibling[1]}) \
            if sibling else None
        ladder = "pcie" if cur["intra"].startswith("pcie") else "nvlink"
        for gen, (gpu, intra) in zip(common.GENERATIONS, common.GPU_LADDERS[ladder]):
            job[gen] = at(j, **{**cur, "gpu": gpu, "intra": intra})
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
        expected = sorted(j["current"]["t_comm"] / sum(j["current"][c] for c in COMPONENTS)
                          for j in analysed(direct) if arch in ("all", j["cur"]["arch"]))
        np.testing.assert_allclose(numbers["comm_share"][arch], expected, rtol=1e-6, atol=1e-12)


def test_bottleneck_counts(numbers, direct):
    for arch in (*numbers["archs"], "all"):
        codes = [j["current"]["bottleneck"] for j in analysed(direct) if arch in ("all", j["cur"]["arch"])]
        expected = {name: codes.count(k) for k, name in enumerate(common.BOTTLENECKS)}
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
    no_nvlink = [j for j in one if j["cur"]["gpu"] not in common.NVLINK_SERVER]
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
        sizes = [len(old.labels[d]) for d in common.COORDS]
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
    assert common.pct(numbers["breakdown"]["all"]["t_comm"]) in text
    assert common.pct(numbers["projections"]["ps_nvlink"]["share_faster"]) in text
    assert common.times(numbers["projections"]["ethernet"]["mean"]) in text
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
    assert " ".join(common.SWEEP_COMMAND.split()) in help_text


def test_cli_report_bad_input(study, tmp_path):
    assert_clean_error(run("report", tmp_path / "missing.h5", "--out", tmp_path / "rep"), "no cube")
    (tmp_path / "junk.h5").write_text("not hdf5")
    assert_clean_error(run("report", tmp_path / "junk.h5", "--out", tmp_path / "rep"), "not a readable HDF5")
    assert_clean_error(run("report", study / "study.h5", "--out", study / "pop.csv"), "is a file")
    # a cube swept over explicit GPU counts has no "current" n_gpu: the report says what to do
    spec = spec_from_dict({"grid": {"gpu": ["V100"], "n_gpu": [1, 8], "network": ["eth-25g"],
                                    "precision": ["fp32"]}}, "test")
    spec.workloads = str(study / "pop.csv")
    run_sweep(spec, tmp_path / "counts.h5", progress=False)
    assert_clean_error(run("report", tmp_path / "counts.h5", "--out", tmp_path / "rep"),
                       'n_gpu = "current"', "study-spec")
    # a reduce-only cube has no cube variables
    spec = load_spec(STUDY_SPEC)
    spec.workloads = str(study / "pop.csv")
    run_sweep(spec, tmp_path / "reduced.h5", progress=False, reduce_only=True)
    assert_clean_error(run("report", tmp_path / "reduced.h5", "--out", tmp_path / "rep"), "reduce-only")
    assert not (tmp_path / "rep").exists()
