"""The report on a 2026 population: LLM jobs in the cluster-design ranking beside the data-parallel
ones (checked against the cube read by label with xarray), the variants of section 4 derived
from the cube's own model, and the design reader's variables read by their dimension names."""

from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401  (registers the blosc filter for reading)
import numpy as np
import pytest
import xarray as xr

from paigrid.inputs.spec import spec_from_dict
from paigrid.orchestration import run_sweep
from paigrid.study import report as R
from paigrid.study.designs import read_at, variable_dims
from paigrid.study.trace import write_population
from test_report import _row

H100 = dict(intra="nvswitch-nvlink4", network="ib-ndr-400g", precision="amp-bf16")
ROWS = [
    _row("dp-ps", "resnet50", "ps-worker", "V100-PCIe-16GB", 4),
    _row("dp-1", "resnet50", "1w1g", "V100-SXM2-16GB", 1, intra="nvlink2-hcm"),
    _row("dp-ar", "bert", "allreduce-local", "H100-SXM5-80GB", 8, **H100),
    _row("llm-8", "llama3-8b", "allreduce-local", "H100-SXM5-80GB", 8, **H100),
    _row("llm-16", "llama3-8b", "allreduce-cluster", "H100-SXM5-80GB", 16, **H100),
    # its GPU is not in the cube: counted, not analysed
    _row("llm-a100", "llama2-7b", "1w1g", "A100-SXM4-80GB", 1, intra="nvswitch-nvlink3", network="ib-ndr-400g"),
]
SPEC = {
    "grid": {
        "arch": ["1w1g", "allreduce-local", "ps-worker", "allreduce-cluster"],
        "n_gpu": "current",
        "gpu": ["V100-PCIe-16GB", "V100-SXM2-16GB", "H100-SXM5-80GB"],
        "intra": ["pcie3", "nvlink2-hcm", "nvswitch-nvlink4"],
        "network": ["eth-25g", "ib-ndr-400g"],
        "precision": ["fp32", "amp-bf16"],
    },
    "llm": {"max_tp": 2, "cp": [1], "vpp": [1], "micro_batch": [1], "zero": [1], "recompute": ["selective"]},
}


def _sweep(folder: Path, model: str) -> Path:
    write_population(ROWS, folder / "pop.csv")
    spec = spec_from_dict({"workloads": str(folder / "pop.csv"), "model": model, **SPEC}, "test.toml")
    run_sweep(spec, folder / "mixed.h5", progress=False)
    return folder / "mixed.h5"


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    """Three data-parallel and three LLM jobs of a 2026 population, swept under pai-v2."""
    return _sweep(tmp_path_factory.mktemp("mixed"), "pai-v2")


@pytest.fixture(scope="module")
def numbers(cube):
    return R.compute_report(cube, block_jobs=2)


def test_llm_jobs_keep_their_design_of_today_in_the_cube(cube):
    with xr.open_dataset(cube, engine="h5netcdf", group="llm") as llm:
        assert list(llm.current_gpu.values) == ["H100-SXM5-80GB", "H100-SXM5-80GB", "A100-SXM4-80GB"]
        assert list(llm.current_n_gpu.values) == [8, 16, 1]
        assert set(llm.current_network.values) == {"ib-ndr-400g"}
        assert {1, 2, 4, 8, 16} <= set(llm.n_gpu.values)  # n_gpu = "current": every job's count is swept


def _by_hand(cube):
    """Per design (gpu, intra, domain, network): the jobs of both families that run it, their
    GPU-hours at the current count, read by label."""
    with xr.open_dataset(cube, engine="h5netcdf") as root, xr.open_dataset(cube, engine="h5netcdf", group="llm") as g:
        root, g = root.load(), g.load()
    jobs = []
    for j in range(root.sizes["job"]):
        cur = {d: str(root[f"current_{d}"].values[j]) for d in ("arch", "gpu", "intra", "network", "precision")}
        here = root.isel(job=j).sel(n_gpu=0, arch=cur["arch"], precision=cur["precision"])
        t0 = float(here.sel(gpu=cur["gpu"], intra=cur["intra"], network=cur["network"]).step_time)
        n0 = int(root.current_n_gpu.values[j])

        def dp(design, here=here, t0=t0, n0=n0):
            cell = here.sel(gpu=design["gpu"], intra=design["intra"], network=design["network"])
            ok = int(cell.invalid_reason) == 0 and int(cell.fits_memory) == 1
            return n0 * float(cell.step_time) / t0 if ok else None

        jobs.append(dp)
    for j in range(2):  # the two LLM jobs whose design of today is in the cube
        best = g.best_step_time.isel(job=j).sel(precision=str(g.current_precision.values[j]))
        gpu, n0 = str(g.current_gpu.values[j]), int(g.current_n_gpu.values[j])
        t0 = float(best.sel(gpu=gpu, n_gpu=n0, domain=8, network=str(g.current_network.values[j])))
        intra = dict(zip(map(str, g.gpu.values), map(str, g.intra.values)))

        def llm(design, best=best, t0=t0, n0=n0, intra=intra):
            if intra[design["gpu"]] != design["intra"]:
                return None
            t = float(best.sel(gpu=design["gpu"], n_gpu=n0, domain=int(design["domain"]), network=design["network"]))
            return n0 * t / t0 if np.isfinite(t) else None

        jobs.append(llm)
    price = {str(k): float(v) for k, v in zip(root.gpu.values, root.price.values)}
    return jobs, price


def test_llm_jobs_enter_every_design_by_hand(cube, numbers):
    d = numbers["designs"]
    assert d["dims"] == ("gpu", "intra", "domain", "network") and d["families"] == {"dp": 3, "llm": 2}
    assert numbers["llm"]["analysed"] == 2 and numbers["llm"]["excluded"]["current_not_in_cube"] == 1
    jobs, price = _by_hand(cube)
    assert d["today"]["gpu_hours"] == 4 + 1 + 8 + 8 + 16
    for row in d["designs"]:
        hours = [h for h in (job(row["design"]) for job in jobs) if h is not None]
        assert row["jobs"] == len(hours) and row["cannot_run"] == len(jobs) - len(hours)
        assert row["current"]["gpu_hours"] == pytest.approx(sum(hours), rel=1e-6)
        assert row["current"]["cost"] == pytest.approx(sum(hours) * price[row["design"]["gpu"]], rel=1e-6)
    # the LLM jobs run only designs with their GPU's intra link; the data-parallel ones any domain alike
    pcie = [r for r in d["designs"] if r["design"]["gpu"] == "H100-SXM5-80GB" and r["design"]["intra"] == "pcie3"]
    assert pcie and all(r["bottlenecks"]["llm_compute"] + r["cannot_run"] >= 2 for r in pcie)
    mixes = [r["bottlenecks"] for r in d["designs"] if r["design"]["intra"] == "nvswitch-nvlink4"]
    assert all(sum(v for k, v in m.items() if k.startswith("llm_")) == 2 for m in mixes)


def test_llm_cheapest_count_by_hand(cube):
    """An LLM job's cheapest count on a design: the fewest n x T(n) / T0 over the group's counts."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.study.llm_designs import llm_family

    with h5py.File(cube, "r") as f:
        fam = llm_family(f, Catalogues.load())
    with xr.open_dataset(cube, engine="h5netcdf", group="llm") as g:
        best = g.best_step_time.isel(job=1).sel(precision="amp-bf16").load()
    k = next(
        i
        for i, lab in enumerate(fam["labels"])
        if lab["domain"] == "8" and lab["network"] == "eth-25g" and lab["gpu"] == "H100-SXM5-80GB"
    )
    t0 = float(best.sel(gpu="H100-SXM5-80GB", n_gpu=16, domain=8, network="ib-ndr-400g"))
    hours = {
        int(n): int(n) * float(best.sel(gpu="H100-SXM5-80GB", n_gpu=n, domain=8, network="eth-25g")) / t0
        for n in best.n_gpu.values
    }
    hours = {n: h for n, h in hours.items() if np.isfinite(h)}
    fewest = min(hours, key=hours.get)
    assert fam["cheap_count"][1, k] == fewest and fam["cheap_hours"][1, k] == pytest.approx(hours[fewest])
    assert fam["today"][1] == pytest.approx(t0) and fam["today_layout"][1].startswith("tp")


def test_designs_one_to_a_job_do_not_make_a_tie(numbers):
    """Designs that differ only in the NVLink domain (or a dimension the architecture ignores) are
    one design to a data-parallel job: its best design is a tie only against another design."""
    d = numbers["designs"]
    assert d["ties"]["jobs"] == 5 and d["ties"]["tied"] < 5
    assert d["ties_llm"]["jobs"] == 2 and sum(d["best_llm"].values()) == 2


def test_the_report_says_what_is_analysed_for_llm_jobs(cube, tmp_path):
    text = R.write_report(cube, tmp_path / "rep").read_text()
    assert "also holds 3 LLM-family job(s)" in text and "of which 2 are analysed" in text
    assert "sections 1-4 are about the data-parallel architectures" in text
    assert "The LLM jobs' own cheapest designs at their current counts" in text
    assert "LLM compute" in text
    header = (tmp_path / "rep" / "designs.csv").read_text().splitlines()[0]
    assert "domain" in header and "bottleneck_llm_compute_jobs" in header


def test_variables_are_read_by_their_dimension_names(tmp_path):
    """A per-(job, GPU) variable stored in another dimension order reads the same by name."""
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2, size=(3, 4, 2)).astype(np.uint8)  # (job, gpu, precision)
    ds = xr.Dataset(
        {
            "fits_memory": (("job", "gpu", "precision"), values),
            "turned": (("precision", "gpu", "job"), values.transpose(2, 1, 0)),
        },
        coords={"job": ["a", "b", "c"], "gpu": list("wxyz"), "precision": ["fp32", "amp"]},
    )
    ds.to_netcdf(tmp_path / "v.h5", engine="h5netcdf")
    with h5py.File(tmp_path / "v.h5", "r") as f:
        assert variable_dims(f["turned"], ("job", "gpu", "precision")) == ("precision", "gpu", "job")
        choice = {"precision": np.array([1, 0, 1])}
        a = read_at(f, "fits_memory", slice(0, 3), choice, ("job", "gpu", "precision"))
        b = read_at(f, "turned", slice(0, 3), choice, ("job", "gpu", "precision"))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, values[np.arange(3), :, [1, 0, 1]])


# --- section 4: the variants of the cube's own model --------------------------------------------
def _paper_times(numbers):
    return numbers["paper"]["figures"]["base"]["current"]["step_time"], numbers["current"]["step_time"][
        numbers["analysed"]
    ]


def test_a_pai_v2_cube_gets_variants_of_its_own_model(numbers):
    paper = numbers["paper"]
    assert paper["model"].startswith("pai-v2") and "built-in efficiencies" in paper["model"]
    ours, cube = _paper_times(numbers)
    np.testing.assert_allclose(ours, cube, rtol=1e-6)  # the base is the model that made the cube
    assert {"base", "nic", "comm-v2"} <= set(paper["figures"]) and "shared-nic" not in paper["figures"]
    assert paper["bracket"]["ps_comm_share"][0] == paper["figures"]["base"]["ps_comm_share"]
    assert (
        "**pai-v2 (compute model pai-v2; built-in efficiencies)**"
        in R.write_report(numbers["cube"]["path"], Path(numbers["cube"]["path"]).parent / "rep-v2").read_text()
    )


def test_a_calibrated_cube_gets_variants_with_its_efficiencies(tmp_path):
    calibration = tmp_path / "cal.toml"
    calibration.write_text(
        '[flop_efficiency]\nfp32 = 0.31\n[memory_efficiency]\ndefault = 0.41\n[options]\nps_nic = "per-worker"\n'
    )
    write_population(ROWS[:3], tmp_path / "pop.csv")
    spec = spec_from_dict({"workloads": str(tmp_path / "pop.csv"), "model": "pai-v1", **SPEC}, "test.toml")
    run_sweep(spec, tmp_path / "cal.h5", calibration=calibration, progress=False)
    numbers = R.compute_report(tmp_path / "cal.h5")
    paper = numbers["paper"]
    assert f"the calibration {calibration}" in paper["model"] and "ps_nic = per-worker" in paper["model"]
    ours, cube = _paper_times(numbers)
    np.testing.assert_allclose(ours, cube, rtol=1e-6)
    # a per-worker base: the bracket's other side is the shared NIC
    assert "shared-nic" in paper["figures"] and "nic" not in paper["figures"]
    assert paper["bracket"]["ps_comm_share"][1] == paper["figures"]["base"]["ps_comm_share"]
    # the calibration changed since the sweep: the built-in efficiencies, and the report says so
    calibration.write_text("[flop_efficiency]\nfp32 = 0.9\n")
    again = R.compute_report(tmp_path / "cal.h5")["paper"]
    assert "built-in efficiencies: the calibration" in again["model"] and "has changed" in again["model"]
