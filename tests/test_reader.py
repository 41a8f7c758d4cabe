"""The reader's parts that answer from both sources and both families: the xarray backend entry
point (``engine="paigrid"``), ``--per design``, the data-parallel MFU column and the LLM chunk
scanner, each against a brute force over the whole arrays of a small mixed cube (chunked small,
so that a filter has chunks to leave out)."""

import csv
import itertools
import json
import math
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
import xarray as xr

import paigrid
from paigrid import store
from paigrid.errors import PaigridError
from paigrid.llm.query import LLM_WHERE_DIMS, GroupSource, llm_best, query_every_family
from paigrid.schema import ARCH_IGNORES
from paigrid.sources import ChunkReader

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SPEC = {
    "workloads": ["resnet50", "bert-large-seq128", "llama3-8b"],
    "grid": {
        "gpu": ["A100-SXM4-80GB", "H100-SXM5-80GB"],
        "n_gpu": [8, 64],
        "precision": ["amp-bf16"],
        "network": ["ib-hdr-200g", "ib-ndr-400g"],
    },
    "llm": {"cp": [1], "micro_batch": [1, 2], "zero": [1], "vpp": [1]},
}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A mixed cube (2 data-parallel jobs, 1 LLM job) whose LLM cells are chunked 16 layouts a chunk."""
    path = tmp_path_factory.mktemp("reader") / "mixed.h5"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "CUBE_CHUNK_BYTES", 4 * 1 * 2 * 1 * 16)  # domain x network x precision x 16 layouts
        paigrid.sweep(SPEC, out=path)
    with h5py.File(path, "r") as f:
        assert f["llm/step_time"].chunks[1] == 16 < f["llm/step_time"].shape[1]
    return path


# --- the xarray backend ---------------------------------------------------------------------


def test_the_backend_is_registered_and_claims_no_file_unnamed():
    engines = xr.backends.list_engines()
    assert "paigrid" in engines
    assert not engines["paigrid"].guess_can_open(str(DATA / "format1" / "cube.h5"))


@pytest.mark.parametrize("fixture", ["format1", "format3", "format4"])
def test_the_backend_presents_every_format_as_open_dataset(fixture):
    path = DATA / fixture / "cube.h5"
    with xr.open_dataset(path, engine="paigrid") as ds, paigrid.open_dataset(path) as expected:
        for name in ("throughput", "cost", "energy", "valid", "step_time"):
            assert ds[name].attrs["units"] == expected[name].attrs["units"]
            np.testing.assert_array_equal(ds[name].values, expected[name].values)
        step = ds.step_time.values.astype(np.float64)
        valid = ds.valid.values == 1
        assert np.all(np.isnan(step[~valid]))  # an invalid cell has no time


def test_the_backend_presents_the_llm_group_with_derived_variables(mixed):
    with xr.open_dataset(mixed, engine="paigrid", group="llm") as ds:
        batch = ds.global_batch.values[:, None, None, None, None, None, None]
        step = ds.step_time.values.astype(np.float64)
        np.testing.assert_allclose(ds.throughput.values, batch / step, rtol=1e-12)
        np.testing.assert_allclose(ds.cost.values, ds.cost_per_step.values / batch * 1e6, rtol=1e-12)
        np.testing.assert_allclose(ds.energy.values, ds.energy_per_step.values / batch, rtol=1e-12)
        assert ds.throughput.attrs["units"] == "samples/s" and ds.cost.attrs["units"] == "USD/1e6 samples"
        assert ds.energy.attrs["units"] == "J/sample"
        np.testing.assert_array_equal(ds.valid.values, (ds.invalid_reason.values == 0).astype(np.uint8))
        assert np.isnan(step[ds.valid.values == 0]).all() and np.isfinite(step[ds.valid.values == 1]).all()
        # lazily: a selection reads and derives only its part, with the same values
        part = ds.cost.isel(layout=[3, 1], gpu=1).values
        np.testing.assert_array_equal(part, ds.cost.values[:, [3, 1], 1])
        assert (
            ds.paigrid.best().arch.values[0] == paigrid.open_dataset(mixed, group="llm").paigrid.best().arch.values[0]
        )
    with xr.open_dataset(mixed, engine="paigrid", drop_variables=["t_comm"]) as root:
        assert "t_comm" not in root and "throughput" in root


def test_the_backend_refuses_a_non_cube_in_one_sentence(tmp_path):
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = np.arange(3)
    with pytest.raises(PaigridError, match="not a paigrid cube"):
        xr.open_dataset(tmp_path / "other.h5", engine="paigrid")
    with pytest.raises(PaigridError, match="groups are the root"):
        xr.open_dataset(DATA / "format1" / "cube.h5", engine="paigrid", group="nope")


# --- --per design --------------------------------------------------------------------------


def _dp_brute_per_design(path):
    """Each data-parallel job's best (smallest time per sample, first of equals in (precision,
    arch) order) at each (gpu, n_gpu, intra, network), from the whole arrays."""
    out = []
    with h5py.File(path, "r") as f:
        jobs = [j.decode() for j in f["job"][()]]
        arch, gpu, intra, network, precision = (
            [v.decode() for v in f[d][()]] for d in ("arch", "gpu", "intra", "network", "precision")
        )
        n_gpu, samples = f["n_gpu"][()], f["samples_per_step"][()]
        for j, job in enumerate(jobs):
            step, fits = f["step_time"][j].astype(np.float64), f["fits_memory"][j]
            for g, n, i, w in itertools.product(*(range(len(x)) for x in (gpu, n_gpu, intra, network))):
                found = None
                for p, a in itertools.product(range(len(precision)), range(len(arch))):
                    value = step[a, g, n, i, w, p] if fits[g, p] == 1 else math.nan
                    metric = value / (n_gpu[n] * samples[j])
                    if math.isfinite(metric) and (found is None or metric < found[0]):
                        found = (metric, a, p, value)
                if found is not None:
                    _, a, p, value = found
                    ignored = ARCH_IGNORES.get(arch[a], ())
                    out.append(
                        (
                            job,
                            arch[a],
                            gpu[g],
                            int(n_gpu[n]),
                            "any" if "intra" in ignored else intra[i],
                            "any" if "network" in ignored else network[w],
                            precision[p],
                            float(value),
                        )
                    )
    return out


def _llm_brute(path, where, top=1, per_design=False):
    """The LLM job's rows from the whole cells: (layout label without dp, gpu, n_gpu, domain,
    network, step_time), the ``top`` first by step time (first of equals by position), or the
    best of each (gpu, n_gpu, domain, network)."""
    with xr.open_dataset(path, engine="h5netcdf", group="llm") as ds:
        step = ds.step_time.values[0].astype(np.float64)
        labels = {d: [str(v) for v in ds[d].values] for d in LLM_WHERE_DIMS}
    sel = [where.get(d, range(len(labels[d]))) for d in LLM_WHERE_DIMS]
    cells = [
        (step[c], k, c)
        for k, c in enumerate(itertools.product(*sel))
        if math.isfinite(step[c])  # position k counts every selected cell
    ]
    if per_design:
        best = {}
        for value, k, c in cells:
            design = c[1:5]
            if design not in best or value < best[design][0]:
                best[design] = (value, k, c)
        chosen = [best[d] for d in sorted(best)]
    else:
        chosen = sorted(cells, key=lambda x: (x[0], x[1]))[:top]
    return [
        (labels["layout"][c[0]], labels["gpu"][c[1]], int(labels["n_gpu"][c[2]]), int(labels["domain"][c[3]]),
         labels["network"][c[4]], float(value))
        for value, _, c in chosen
    ]  # fmt: skip


def _llm_seen(rows):
    out = []
    for r in rows:
        label = "-".join(part for part in r["arch"].split("-") if not part.startswith("dp"))
        # the stored bests are float64, the cells float32: compared as the cells store them
        out.append((label, r["gpu"], r["n_gpu"], r["domain"], r["network"], float(np.float32(r["step_time"]))))
    return out


def test_per_design_is_each_job_s_best_at_each_design(mixed):
    rows, _ = query_every_family(mixed, per="design")
    dp = [r for r in rows if r["family"] == "dp"]
    seen = [
        (r["job"], r["arch"], r["gpu"], r["n_gpu"], r["intra"], r["network"], r["precision"], r["step_time"])
        for r in dp
    ]
    assert seen == _dp_brute_per_design(mixed)
    assert len({(r["gpu"], r["n_gpu"], r["intra"], r["network"]) for r in dp if r["job"] == "resnet50"}) > 8
    llm = [r for r in rows if r["family"] == "llm"]
    assert _llm_seen(llm) == _llm_brute(mixed, {}, per_design=True)
    # a layout filter: the cells answer, the same way
    with h5py.File(mixed, "r") as f:
        tp = f["llm/tp"][()]
    rows, _ = query_every_family(mixed, per="design", where=["tp=2"])
    chosen = [k for k, t in enumerate(tp) if t == 2]
    assert _llm_seen([r for r in rows if r["family"] == "llm"]) == _llm_brute(
        mixed, {"layout": chosen}, per_design=True
    )


def test_per_design_on_the_command_line(mixed):
    from cli_helpers import run

    result = run("query", str(mixed), "--best-arch", "--per", "design", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {r["job"] for r in rows} == {"resnet50", "bert-large-seq128", "llama3-8b"}
    llm = [r for r in rows if r["family"] == "llm"]
    assert len(llm) == len({(r["gpu"], r["n_gpu"], r["domain"], r["network"]) for r in llm}) == 2 * 2 * 2
    refused = run("query", str(mixed), "--best-arch", "--per", "design", "--top", "2")
    assert refused.exit_code != 0 and "--per design" in refused.output and "Traceback" not in refused.output


# --- the data-parallel MFU ------------------------------------------------------------------


def _csv(name):
    with open(ROOT / "datasets" / name, newline="") as handle:
        return {row["name"]: row for row in csv.DictReader(handle)}


def test_the_data_parallel_mfu_is_model_flops_over_the_dense_peak(mixed):
    workloads, gpus, precisions = _csv("workloads.csv"), _csv("gpus.csv"), _csv("precisions.csv")
    rows, _ = query_every_family(mixed, top=3)
    dp = [r for r in rows if r["family"] == "dp"]
    assert dp and all(r["arch"] is not None for r in dp)
    with h5py.File(mixed, "r") as f:
        samples = dict(zip((j.decode() for j in f["job"][()]), f["samples_per_step"][()]))
    for r in dp:
        flop = 3 * float(workloads[r["job"]]["fwd_GFLOP_per_sample"]) * 1e9  # forward + backward (2x)
        peak = float(gpus[r["gpu"]][precisions[r["precision"]]["peak_column"]]) * 1e12
        assert r["mfu"] == pytest.approx(flop * samples[r["job"]] / (r["step_time"] * peak), rel=1e-12)
        assert 0 < r["mfu"] < 1
    assert all(0 < r["mfu"] < 1 for r in rows if r["family"] == "llm")


def test_no_mfu_from_catalogues_other_than_the_cube_s(mixed, tmp_path):
    import shutil

    copy = tmp_path / "other-catalogues.h5"
    shutil.copy(mixed, copy)
    with h5py.File(copy, "r+") as f:
        recorded = json.loads(f.attrs["catalogue_sha256"])
        f.attrs["catalogue_sha256"] = json.dumps({**recorded, "gpus": "0" * 64})  # a user's GPU catalogue
    rows, notes = query_every_family(copy)
    assert all(math.isnan(r["mfu"]) for r in rows if r["family"] == "dp")
    assert any("mfu is empty" in n and "gpus" in n for n in notes)
    assert all(r["mfu"] > 0 for r in rows if r["family"] == "llm")  # the kernel's own, unaffected


# --- the LLM chunk scanner ------------------------------------------------------------------


WHERES = [
    {"layout": [0, 5, 17, 40]},
    {"layout": list(range(16, 40))},
    {"gpu": [1], "network": [0]},
    {"layout": [2, 33], "n_gpu": [1]},
    {},
]


@pytest.mark.parametrize("top", [1, 3, 50])
def test_the_llm_scan_equals_a_brute_force_selection(mixed, top):
    with h5py.File(mixed, "r") as f, xr.open_dataset(mixed, engine="paigrid", group="llm") as ds:
        for where in WHERES:
            if top == 1 and "layout" not in where:
                where = {**where, "layout": list(range(0, 60, 3))}  # cells, not the stored bests
            rows = llm_best(GroupSource(f["llm"]), "time", where, None, top)
            assert _llm_seen(rows) == _llm_brute(mixed, where, top), where
            # the Dataset answers alike
            assert _plain(rows) == _plain(llm_best(GroupSource(ds), "time", where, None, top))


def _plain(rows):
    """Rows with NaN as None, to compare."""
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in rows]


def test_the_llm_scan_reads_only_the_chunks_it_needs(mixed):
    with h5py.File(mixed, "r") as f:
        step = f["llm/step_time"]
        chunks, shape = step.chunks, step.shape
        for where in WHERES:
            sel = {d: np.asarray(where.get(d, range(n))) for d, n in zip(LLM_WHERE_DIMS, shape[1:])}
            reader = ChunkReader(SimpleNamespace(file=f), ("llm/step_time",), sel, dims=LLM_WHERE_DIMS)
            read = {corner for corner, _, _ in reader.pieces}
            needed = {
                tuple(int(k) // c * c for k, c in zip(cell, chunks[1:]))
                for cell in itertools.product(*(sel[d] for d in LLM_WHERE_DIMS))
            }
            assert read == needed, where
            all_chunks = math.prod(math.ceil(n / c) for n, c in zip(shape[1:], chunks[1:]))
            assert where == {} or len(read) < all_chunks  # a filter leaves chunks out
            (values,) = reader.decode(0, reader.raw(0))
            expected = step[0][np.ix_(*(sel[d] for d in LLM_WHERE_DIMS))]
            np.testing.assert_array_equal(values[0], expected)
