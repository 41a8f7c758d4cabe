"""The cube scan of ``paigrid query`` (``--top``, filters on arch, intra or network): chunk by
chunk, decompressed in threads, candidates chosen with argpartition.  It must give the rows of
a brute-force selection over every configuration, in the same order with the same ties, on a
cube with many invalid cells and many equal step times, through the parallel decoder and
through the plain h5py / xarray reads alike, whatever the chunk shape (split along gpu and
network as ``store.cube_chunk_shape`` chooses, or only along job as older cubes are), and
reading only the chunks that the filters touch."""

import itertools
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from paigrid import query, store
from paigrid.codecs import chunk_decoder, chunk_encoder
from paigrid.cube import cube_from_dataset, open_cube
from paigrid.inputs.spec import load_spec
from paigrid.orchestration import run_sweep
from paigrid.query import _ChunkReader, best_configurations, job_indices
from paigrid.schema import ARCH_IGNORES, LABEL_DIMS

ROOT = Path(__file__).resolve().parent.parent
FORMAT1 = ROOT / "tests" / "data" / "format1"


#: the chunkings of the small cube (4 jobs x 5 arch x 3 gpu x 3 n_gpu x 3 intra x 3 network x 2
#: precision): ``store.cube_chunk_shape``'s for the grid (every dimension but the job whole, as
#: older cubes too are chunked), the same with one GPU per chunk (as on larger grids), and one
#: that splits every dimension it can, unevenly (edge chunks), along network too
PRECOMPILED_SCAN = query._precompiled_scan  # the loader itself (``no_precompiled_scan`` sets it aside)
CHUNKINGS = {"job": (2, 5, 3, 3, 3, 3, 2), "gpu": (1, 5, 1, 3, 3, 3, 2), "uneven": (1, 5, 2, 2, 3, 1, 2)}


@pytest.fixture(
    scope="module",
    params=[("lz4", "job"), ("gzip", "job"), ("none", "job"), ("lz4", "gpu"), ("lz4", "uneven"), ("gzip", "uneven")],
    ids="-".join,
)
def hostile_cube(request, tmp_path_factory):
    """A small cube (4 jobs, chunked as ``CHUNKINGS`` says) whose step times are rounded to two
    digits (many ties) and of which about 60% of the cells, and some (gpu, precision) memory
    fits, are made invalid; written back through h5py, so every chunk keeps its filters and
    checksum."""
    import paigrid.orchestration as orchestration

    compression, chunking = request.param
    path = tmp_path_factory.mktemp(f"scan-{compression}-{chunking}") / "cube.h5"
    spec = load_spec(FORMAT1 / "spec.toml")
    with pytest.MonkeyPatch.context() as patch:
        if chunking == "gpu":
            patch.setattr(store, "CUBE_CHUNK_BYTES", 1)
        elif chunking == "uneven":
            patch.setattr(orchestration, "cube_chunk_shape", lambda grid, jobs_per_block: CHUNKINGS["uneven"])
        run_sweep(spec, path, compression=compression, progress=False)
    with h5py.File(path, "r") as f:
        assert f["step_time"].chunks == CHUNKINGS[chunking] == f["bottleneck"].chunks
    rng = np.random.default_rng(12)
    with h5py.File(path, "r+") as f:
        step = f["step_time"][()]
        step = np.round(step, 2).astype(np.float32)
        step[rng.random(step.shape) < 0.6] = np.nan
        f["step_time"][()] = step
        fits = f["fits_memory"][()]
        fits[rng.random(fits.shape) < 0.2] = 0
        f["fits_memory"][()] = fits
    return path


def _brute(cube, by, where, jobs, top):
    """The rows (job, arch, intra, network, gpu, n_gpu, precision, step_time, bottleneck) by
    looking at every configuration of every job in (gpu, n_gpu, precision, arch, intra, network)
    order, each distinct one once, sorted by (metric, position)."""
    f, labels = cube.file, cube.labels
    sel = {d: where.get(d, list(range(len(labels[d])))) for d in LABEL_DIMS}
    price, samples = f["price"][:], f["samples_per_step"][:]
    rows = []
    for j in job_indices(cube, jobs):
        step, code, fits = f["step_time"][j].astype(np.float64), f["bottleneck"][j], f["fits_memory"][j]
        found = []
        for g, n, p, a in itertools.product(sel["gpu"], sel["n_gpu"], sel["precision"], sel["arch"]):
            ignored = ARCH_IGNORES.get(labels["arch"][a], ())
            seen = set()
            for i, w in itertools.product(sel["intra"], sel["network"]):
                value = step[a, g, n, i, w, p] if fits[g, p] == 1 else np.nan
                group = (None if "intra" in ignored else i, None if "network" in ignored else w)
                if np.isfinite(value) and group in seen:
                    value = np.nan
                if np.isfinite(value):
                    seen.add(group)
                n_value = float(labels["n_gpu"][n])
                metric = (
                    value / (n_value * samples[j]) if by == "time" else price[g] / 3600.0 * 1e6 / samples[j] * value
                )
                found.append((np.inf if np.isnan(metric) else metric, len(found), value, a, g, n, i, w, p))
        found.sort(key=lambda c: (c[0], c[1]))
        chosen = [c for rank, c in enumerate(found[:top]) if rank == 0 or not np.isnan(c[2])]
        for _, _, value, a, g, n, i, w, p in chosen:
            if np.isnan(value):
                rows.append((labels["job"][j],) + (None,) * 6 + (None,))
                continue
            ignored = ARCH_IGNORES.get(labels["arch"][a], ())
            rows.append(
                (
                    labels["job"][j],
                    labels["arch"][a],
                    "any" if "intra" in ignored else labels["intra"][i],
                    "any" if "network" in ignored else labels["network"][w],
                    labels["gpu"][g],
                    int(labels["n_gpu"][n]),
                    labels["precision"][p],
                    float(value),
                    int(code[a, g, n, i, w, p]),
                )
            )
    return rows


def _seen(rows):
    from paigrid.kernels import dp_columns as L

    out = []
    for r in rows:
        if r["arch"] is None:
            out.append((r["job"],) + (None,) * 7)
            continue
        out.append(
            (
                r["job"],
                r["arch"],
                r["intra"],
                r["network"],
                r["gpu"],
                r["n_gpu"],
                r["precision"],
                r["step_time"],
                L.BOTTLENECK_NAMES.index(r["bottleneck"]),
            )
        )
    return out


WHERES = [
    {"network": [1]},
    {"arch": [0, 2], "intra": [0, 2]},
    {"gpu": [1, 2], "network": [0, 2], "precision": [1]},
    {"intra": [1], "n_gpu": [0, 2]},
    {},
    {"gpu": [2]},
    {"gpu": [0], "network": [2]},
    {"precision": [0]},
    {"n_gpu": [1]},
    {"arch": [1]},
    {"network": [2, 0]},
]


@pytest.fixture(autouse=True)
def no_precompiled_scan(monkeypatch):
    """The scans select with the JIT kernel or numpy, as ``SCAN_KERNEL_CELLS`` says, not with the
    precompiled kernel that a command's cache folder may hold (``ahead`` tests it)."""
    monkeypatch.setattr(query, "_precompiled_scan", lambda build: None)


@pytest.fixture(scope="module")
def ahead():
    """The precompiled selection kernel, built in the tests' kernel cache folder (as
    ``tests/test_precompiled.py`` builds the module: about 20 s once per kernel sources)."""
    import os

    from paigrid import precompiled

    saved = os.environ.get("NUMBA_CACHE_DIR")
    os.environ["NUMBA_CACHE_DIR"] = saved or str(Path.home() / ".cache" / "paigrid-tests-numba")
    try:
        kernel = PRECOMPILED_SCAN(build=True)
    finally:
        if saved is None:
            del os.environ["NUMBA_CACHE_DIR"]
    assert kernel is not None, precompiled.status()
    return kernel


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("by", ["time", "cost"])
@pytest.mark.parametrize("top", [1, 3, 40, 300])
def test_the_scan_equals_a_brute_force_selection(hostile_cube, by, top, compiled, monkeypatch):
    # the compiled path (the one-pass kernel) in a pool of threads and the numpy one in the calling
    # thread (with fewer than three cores a scan has no pool), on a small cube
    from paigrid import sources

    monkeypatch.setattr(query, "SCAN_KERNEL_CELLS", 0 if compiled else 10**18)
    # a pool only where h5py reads one file from several threads safely (3.12 on): 3.10 crashes
    monkeypatch.setattr(sources, "_workers", lambda: 2 if compiled and sources._threads_safe() else 0)
    cube = open_cube(hostile_cube)
    try:
        reader = _ChunkReader(cube, ("step_time", "bottleneck"))
        # the parallel decoder, for rows of one chunk or several, with the file's own chunk shape
        assert reader.decoders is not None and reader.rows_decoded
        assert reader.chunks == cube.file["step_time"].chunks and reader.rows == reader.chunks[0]
        jobs = [cube.labels["job"][k] for k in (3, 0, 1, 3, 2)]  # out of order, one twice
        ties = 0
        for where in WHERES:
            if top == 1 and not any(d in where for d in ("arch", "intra", "network")):
                where = {**where, "arch": list(range(len(cube.labels["arch"])))[::-1][:3][::-1]}
            rows = best_configurations(cube, by, where, jobs, top)
            assert _seen(rows) == _brute(cube, by, where, jobs, top), where
            ties += sum(r["ties"] > 0 for r in rows if r["ties"] == r["ties"])
            steps = [r["step_time"] for r in rows if r["arch"] is not None]
            ties += len(steps) - len(set(steps))
        assert ties > 0  # the cube has equal step times among the rows, so the order of ties is tested
    finally:
        cube.close()


@pytest.mark.slow
@pytest.mark.parametrize("top", [1, 3, 40])
def test_the_scan_with_the_precompiled_kernel_equals_a_brute_force_selection(hostile_cube, ahead, top, monkeypatch):
    # a command's scans select with the kernel compiled ahead of time, small ones too, numba unloaded
    monkeypatch.setattr(query, "SCAN_KERNEL_CELLS", 10**18)
    monkeypatch.setattr(query, "_precompiled_scan", lambda build: ahead)
    monkeypatch.setattr(query, "_scan_kernel", lambda: pytest.fail("the JIT kernel was loaded"))
    cube = open_cube(hostile_cube)
    try:
        jobs = [cube.labels["job"][k] for k in (3, 0, 1, 3, 2)]
        for by in ("time", "cost"):
            for where in WHERES:
                if top == 1 and not any(d in where for d in ("arch", "intra", "network")):  # a scan, not the bests
                    where = {**where, "arch": list(range(len(cube.labels["arch"])))[::-1][:3][::-1]}
                rows = best_configurations(cube, by, where, jobs, top)
                assert _seen(rows) == _brute(cube, by, where, jobs, top), (by, where)
    finally:
        cube.close()


@pytest.mark.parametrize("large", [False, True])
def test_only_a_scan_large_enough_for_the_jit_kernel_builds_the_precompiled_one(hostile_cube, large, monkeypatch):
    # a first small scan must not wait 10-20 s for the ahead-of-time build: it selects with numpy
    from paigrid import precompiled

    asked = []
    monkeypatch.setattr(query, "_precompiled_scan", PRECOMPILED_SCAN)
    monkeypatch.setattr(precompiled, "load", lambda build=False: asked.append(build))
    monkeypatch.setattr(query, "SCAN_KERNEL_CELLS", 0 if large else 10**18)
    if not large:
        monkeypatch.setattr(query, "_scan_kernel", lambda: pytest.fail("the JIT kernel was loaded"))
    cube = open_cube(hostile_cube)
    try:
        where = {"arch": list(range(len(cube.labels["arch"])))}
        jobs = list(cube.labels["job"][:2])
        assert _seen(best_configurations(cube, "time", where, jobs, 3)) == _brute(cube, "time", where, jobs, 3)
    finally:
        cube.close()
    assert asked and set(asked) == {large}  # None came back: numpy (small) or the JIT kernel (large)


@pytest.mark.parametrize("cores", [1, 2, 3, 16])
def test_a_scan_has_a_pool_of_threads_with_three_cores_or_more_and_thread_safe_h5py(cores, monkeypatch):
    from paigrid import sources

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    for safe in (True, False):
        monkeypatch.setattr(sources, "_threads_safe", lambda safe=safe: safe)
        assert sources._workers() == (cores if safe and cores >= 3 else 0)


def test_without_thread_safe_h5py_the_scan_reads_and_decodes_in_the_calling_thread(hostile_cube, monkeypatch):
    # h5py before 3.12 crashes when two threads read one file: every read and decode stays in this thread
    import threading

    from paigrid import sources

    monkeypatch.setattr(query, "SCAN_KERNEL_CELLS", 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)  # a pool otherwise
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    cube = open_cube(hostile_cube)
    try:
        expected = {str(w): _seen(best_configurations(cube, "time", w, None, 3)) for w in WHERES}
        monkeypatch.setattr(sources, "_threads_safe", lambda: False)
        seen_in = set()

        def recorded(original):
            def call(self, *args):
                seen_in.add(threading.get_ident())
                return original(self, *args)

            return call

        for name in ("chunk", "raw", "decode"):
            monkeypatch.setattr(_ChunkReader, name, recorded(getattr(_ChunkReader, name)))
        for where in WHERES:
            rows = best_configurations(cube, "time", where, None, 3)
            assert _seen(rows) == expected[str(where)] == _brute(cube, "time", where, None, 3), where
        assert seen_in == {threading.get_ident()}
    finally:
        cube.close()


@pytest.mark.parametrize("threads", [True, False])
def test_the_scan_fills_the_arrays_of_consumed_jobs_again_with_the_right_values(hostile_cube, threads, monkeypatch):
    # every job many times (more runs than the threads hold ahead), a selection of two networks
    # (several chunks a row where the chunks split them): each job's arrays, copied where they
    # are handed over, equal the file's, and the arrays of consumed runs are filled again
    from paigrid import sources

    # a pool only where h5py reads one file from several threads safely (3.12 on): 3.10 crashes
    monkeypatch.setattr(sources, "_workers", lambda: 2 if threads and sources._threads_safe() else 0)
    cube = open_cube(hostile_cube)
    try:
        sel = {d: np.arange(len(cube.labels[d])) for d in LABEL_DIMS} | {"network": np.array([0, 2])}
        jobs = len(cube.labels["job"])
        job_rows = np.array([j for _ in range(6) for j in (list(range(jobs)) + list(range(jobs))[::-1])])
        arrays = set()

        def select(job, j, pos, position):
            arrays.add(id(job[0].base))
            return j, pos, job[0].copy(), job[1][np.zeros(1, np.intp), *(np.zeros(1, np.intp),) * 5]

        seen = list(cube.source.scan(("step_time", "bottleneck"), sel, job_rows, select, ("bottleneck",)))
        assert [(j, pos) for j, pos, _, _ in seen] == [(int(j), pos) for pos, j in enumerate(job_rows)]
        for j, _, step, code in seen:
            expected = cube.file["step_time"][j][np.ix_(*(sel[d] for d in LABEL_DIMS))]
            assert np.array_equal(step, expected, equal_nan=True)
            assert code[0] == cube.file["bottleneck"][(j, *(int(sel[d][0]) for d in LABEL_DIMS))]
        runs = len(job_rows) if cube.file["step_time"].chunks[0] == 1 else len(job_rows) // 2
        assert len(arrays) < runs / 2  # filled again, not made anew
    finally:
        cube.close()


def test_the_scan_of_a_dataset_and_of_damaged_decoding_equal_the_file(hostile_cube, monkeypatch):
    import paigrid

    monkeypatch.setattr(query, "SCAN_KERNEL_CELLS", 0)

    cube = open_cube(hostile_cube)
    try:
        expected = best_configurations(cube, "time", {"network": [0, 1]}, None, 5)
        pareto = best_configurations(cube, "time", {"intra": [0, 1]}, None, 1, pareto=True)
    finally:
        cube.close()
    with paigrid.open_dataset(hostile_cube) as ds:  # no stored chunks to decode: read through xarray
        cube = cube_from_dataset(ds)
        assert _seen(best_configurations(cube, "time", {"network": [0, 1]}, None, 5)) == _seen(expected)
    # a chunk the decoder rejects is read again by h5py, which gives the same values
    monkeypatch.setattr(_ChunkReader, "raw", lambda self, start: [b"xxxx"] * len(self.datasets))
    cube = open_cube(hostile_cube)
    try:
        assert _seen(best_configurations(cube, "time", {"network": [0, 1]}, None, 5)) == _seen(expected)
        again = best_configurations(cube, "time", {"intra": [0, 1]}, None, 1, pareto=True)
        assert _seen(again) == _seen(pareto) and len(pareto) > len(set(r["job"] for r in pareto))
    finally:
        cube.close()


@pytest.mark.parametrize("compression", ["lz4", "zstd", "gzip", "none"])
def test_the_chunk_decoder_inverts_the_encoder_and_checks_the_checksum(compression):
    chunk = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5) / 7
    stored = chunk_encoder(compression)(chunk)
    decode = chunk_decoder(compression, chunk.dtype, chunk.shape)
    assert np.array_equal(decode(stored), chunk)
    # into a buffer of the caller's (blosc decompresses there; the others return a new array)
    buffer = np.full(chunk.shape, np.nan, chunk.dtype)
    assert np.array_equal(decode(stored, buffer), chunk)
    assert (buffer is decode(stored, buffer)) == (compression in ("lz4", "zstd"))
    damaged = bytearray(stored)
    damaged[len(damaged) // 2] ^= 0xFF
    with pytest.raises(OSError):
        decode(bytes(damaged))
    with pytest.raises(OSError):
        decode(bytes(damaged), buffer)
    with pytest.raises(OSError):  # a chunk of another size, its checksum right
        chunk_decoder(compression, chunk.dtype, (2, 3, 4))(stored, np.empty((2, 3, 4), chunk.dtype))


def test_the_reader_falls_back_where_the_filters_are_not_the_cube_s(tmp_path):
    path = tmp_path / "copy.h5"
    shutil.copy(FORMAT1 / "cube.h5", path)
    cube = open_cube(path)
    try:
        reader = _ChunkReader(cube, ("step_time", "bottleneck"))
        start = 0
        values = reader.decode(start, reader.raw(start))
        assert np.array_equal(values[0], cube.file["step_time"][0 : reader.rows], equal_nan=True)
    finally:
        cube.close()


def test_a_filtered_scan_reads_only_the_chunks_it_needs(hostile_cube):
    cube = open_cube(hostile_cube)
    try:
        chunks = cube.file["step_time"].chunks
        labels = {d: np.arange(len(cube.labels[d])) for d in LABEL_DIMS}
        for where in WHERES:
            sel = {d: np.asarray(where.get(d, labels[d])) for d in LABEL_DIMS}
            reader = _ChunkReader(cube, ("step_time", "bottleneck"), sel)
            read = {corner for corner, _, _ in reader.pieces}
            needed = {
                tuple(int(k) // c * c for k, c in zip(cell, chunks[1:]))
                for cell in itertools.product(*(sel[d] for d in LABEL_DIMS))
            }
            assert read == needed, where  # every chunk that holds a selected cell, and no other
            start = 0
            values, _ = reader.decode(start, reader.raw(start))
            whole = cube.file["step_time"][start : start + reader.rows]
            local = np.ix_(*(reader.local[d] for d in LABEL_DIMS))
            chosen = np.ix_(*(sel[d] for d in LABEL_DIMS))
            assert np.array_equal(values[(slice(None), *local)], whole[(slice(None), *chosen)], equal_nan=True)
            # the h5py path reads the same chunks
            by_h5py = _ChunkReader(cube, ("step_time", "bottleneck"), sel, parallel=False)
            again, _ = by_h5py.decode(start, by_h5py.raw(start))
            assert by_h5py.decoders is None and np.array_equal(again, values, equal_nan=True)
        if chunks[2] == 1:  # one GPU per chunk: a filter on one gpu reads a third of the chunks
            reader = _ChunkReader(cube, ("step_time",), {"gpu": np.array([1])})
            assert reader.shape[1] == 1 and len(reader.pieces) * 3 == len(_ChunkReader(cube, ("step_time",)).pieces)
    finally:
        cube.close()


@pytest.mark.parametrize("by", ["time", "cost"])
def test_an_older_cube_chunked_by_job_is_scanned_as_before(by, monkeypatch):
    # tests/data/format1: format 1, written by paigrid 0.1.0 through HDF5's own filters (2 jobs
    # per chunk, every other dimension whole)
    monkeypatch.setattr(query, "SCAN_KERNEL_CELLS", 0)
    cube = open_cube(FORMAT1 / "cube.h5")
    try:
        assert cube.file["step_time"].chunks == (2, 5, 3, 3, 3, 3, 2)
        for where in WHERES:
            rows = best_configurations(cube, by, where, None, 3)
            assert _seen(rows) == _brute(cube, by, where, None, 3), where
    finally:
        cube.close()


def test_edge_chunks_are_padded_and_written_where_hdf5_reads_them(tmp_path):
    # a chunk shape that divides no dimension but the arch: every edge chunk is padded
    from paigrid.codecs import chunk_corners, filter_kwargs
    from paigrid.evaluate import Block, encode_cube

    rng = np.random.default_rng(3)
    shape, chunks = (5, 2, 5, 3, 2, 7, 3), (2, 2, 3, 2, 2, 4, 2)
    data = rng.random(shape).astype(np.float32)
    block = Block(0, 0, 5, {"step_time": data.copy()})
    encode_cube(block, "lz4", chunks)
    with h5py.File(tmp_path / "edges.h5", "w") as f:
        dataset = f.create_dataset("step_time", shape, np.float32, chunks=chunks, **filter_kwargs("lz4"))
        for corner, chunk in zip(chunk_corners(shape, chunks), block.chunks["step_time"], strict=True):
            dataset.id.write_direct_chunk(corner, chunk)
        assert np.array_equal(dataset[()], data)


def test_the_chunk_shape_splits_the_gpus_and_never_spans_two_blocks():
    from paigrid.inputs.spec import SweepSpec
    from paigrid.orchestration import prepare, sweep_blocks

    grid, _ = prepare(SweepSpec())  # the default grid: 18 GPUs, 13 networks, 0.58 M configurations a job
    chunks = store.cube_chunk_shape(grid, 7)
    assert chunks == (1, 5, 2, 11, 9, 13, 5)  # one job, 2 GPUs, everything else: 0.25 MiB of float32
    assert 2**17 < np.prod(chunks) * 4 <= 2**19
    small, _ = prepare(load_spec(FORMAT1 / "spec.toml"))  # 1,620 configurations a job: several jobs a chunk
    for per_block in (1, 2, 3, 4):
        blocks, chunks = sweep_blocks(small, per_block, False)
        assert chunks[1:] == small.shape[1:] and 1 <= chunks[0] <= per_block
        assert all((stop - start) % chunks[0] == 0 or stop == len(small.jobs) for start, stop in blocks)


def _ranked_positions(step, fits, arch_names, factor, divide, k):
    """The numpy reference of ``kernels.scan.top_configurations``: every selected cell's metric
    over (gpu, n_gpu, precision, arch, intra, network) after the memory mask and the dedupe
    (``ranking.distinct_configurations``), NaN as +inf, sorted by (metric, position)."""
    from paigrid.ranking import distinct_configurations

    values = distinct_configurations(step, fits, arch_names)  # (g, n, p, a, i, w), float64
    f = factor[:, :, None, None, None, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        metric = values / f if divide else f * values
    key = np.where(np.isnan(metric), np.inf, metric).reshape(-1)
    order = np.lexsort((np.arange(key.size), key))[:k]
    chosen = np.sort(order)
    return chosen, values.reshape(-1)[chosen]


@pytest.mark.parametrize("seed", range(6))
def test_the_selection_kernel_equals_its_numpy_reference(seed):
    # random jobs with many ties (two digits), NaN cells, (gpu, precision) that do not fit, every
    # architecture's ignored dimensions, equal factors across (gpu, n_gpu) (equal metrics in
    # different groups: the position decides) and factors that give no bound (zero, negative)
    from paigrid.kernels.scan import top_configurations

    rng = np.random.default_rng(seed)
    arch_names = ["1w1g", "1wng", "allreduce-local", "ps-worker", "allreduce-cluster"]
    shape = (5, 3, 4, 3, 4, 2)  # arch, gpu, n_gpu, intra, network, precision
    step = np.round(rng.random(shape) * 3 + 0.5, 1).astype(np.float32)
    step[rng.random(shape) < [0.0, 0.3, 0.6, 0.9, 0.99, 0.5][seed]] = np.nan
    fits = (rng.random((3, 2)) < 0.8).astype(np.uint8)
    factor = rng.choice([1.0, 2.0, 4.0], size=(3, 4))
    if seed == 5:
        factor[0, 0], factor[1, 2] = 0.0, -1.0
    ignores = [ARCH_IGNORES.get(name, ()) for name in arch_names]
    skip_i = np.array(["intra" in ign for ign in ignores])
    skip_w = np.array(["network" in ign for ign in ignores])
    sel = [np.arange(n, dtype=np.int64) for n in shape]
    for divide in (True, False):
        for k in (1, 2, 3, 7, 40, step.size):
            index, values = np.empty(k, np.int64), np.empty(k)
            count = top_configurations(step, fits, *sel, skip_i, skip_w, factor, divide, k, index, values)
            expected, expected_values = _ranked_positions(step, fits, arch_names, factor, divide, k)
            assert count == len(expected)
            assert np.array_equal(index[:count], expected), (divide, k)
            assert np.array_equal(values[:count], expected_values, equal_nan=True), (divide, k)
    # a selection of some coordinates of each dimension (the cells of an (arch, gpu, n_gpu) are
    # not skipped as a block then), and the whole selection in an array not C-contiguous
    part = [np.array(c, dtype=np.int64) for c in ([0, 1, 3, 4], [0, 2], [1, 2, 3], [0, 2], [1, 3], [1])]
    cut = step[np.ix_(*part)]
    for divide in (True, False):
        for k in (1, 3, 40):
            index, values = np.empty(k, np.int64), np.empty(k)
            f = factor[np.ix_(part[1], part[2])]
            count = top_configurations(step, fits, *part, skip_i[part[0]], skip_w[part[0]], f, divide, k, index, values)
            names = [arch_names[a] for a in part[0]]
            expected, expected_values = _ranked_positions(cut, fits[np.ix_(part[1], part[5])], names, f, divide, k)
            assert np.array_equal(index[:count], expected), (divide, k)
            assert np.array_equal(values[:count], expected_values, equal_nan=True), (divide, k)
            count = top_configurations(
                np.asfortranarray(step), fits, *sel, skip_i, skip_w, factor, divide, k, index, values
            )
            expected, expected_values = _ranked_positions(step, fits, arch_names, factor, divide, k)
            assert np.array_equal(index[:count], expected), (divide, k)


@pytest.mark.parametrize("seed", range(4))
def test_the_selection_kernel_visits_blocks_in_any_order_with_the_same_result(seed):
    # the kernel visits the (arch, gpu, n_gpu) blocks from the lowest metric up where it knows each
    # block's lowest step time exactly (float32, C-contiguous, no cell with its sign bit set), and
    # in order otherwise; both against the numpy reference, on jobs whose k best lie in late blocks
    # (the lowest step times in the last arch and GPU), with ties across blocks, and on jobs with a
    # negative cell, a -0 or a negative NaN (the blocks then in order)
    from paigrid.kernels.scan import top_configurations

    rng = np.random.default_rng(100 + seed)
    arch_names = ["1w1g", "1wng", "allreduce-local", "ps-worker", "allreduce-cluster"]
    shape = (5, 4, 3, 3, 4, 2)
    step = np.round(rng.random(shape) * 3 + 0.5, 1).astype(np.float32)
    step[-1, -1] -= 0.4  # the best cells in the last blocks visited in order
    step[rng.random(shape) < 0.4] = np.nan
    fits = np.ones((4, 2), np.uint8)
    factor = rng.choice([1.0, 2.0], size=(4, 3))
    ignores = [ARCH_IGNORES.get(name, ()) for name in arch_names]
    skip_i = np.array(["intra" in ign for ign in ignores])
    skip_w = np.array(["network" in ign for ign in ignores])
    sel = [np.arange(n, dtype=np.int64) for n in shape]
    signed = step.copy()
    signed[0, 0, 0, 0, 0, 0] = [-0.5, -0.0, -np.nan, -2.0][seed]
    for job in (step, signed):
        for divide in (True, False):
            for k in (1, 3, 17):
                index, values = np.empty(k, np.int64), np.empty(k)
                count = top_configurations(job, fits, *sel, skip_i, skip_w, factor, divide, k, index, values)
                expected, expected_values = _ranked_positions(job, fits, arch_names, factor, divide, k)
                assert np.array_equal(index[:count], expected), (divide, k)
                assert np.array_equal(values[:count], expected_values, equal_nan=True), (divide, k)


@pytest.mark.parametrize("parallel", [True, False])
def test_cells_read_only_where_indexed_equal_the_whole_variable(hostile_cube, parallel):
    from paigrid.sources import Cells

    cube = open_cube(hostile_cube)
    try:
        rng = np.random.default_rng(5)
        labels = {d: np.arange(len(cube.labels[d])) for d in LABEL_DIMS}
        for where in WHERES:
            sel = {d: np.asarray(where.get(d, labels[d])) for d in LABEL_DIMS}
            reader = _ChunkReader(cube, ("bottleneck",), sel, parallel=parallel)
            assert (reader.decoders is not None) == parallel
            for j in range(len(cube.labels["job"])):
                whole = cube.file["bottleneck"][j][np.ix_(*(sel[d] for d in LABEL_DIMS))]
                local = tuple(rng.integers(0, len(sel[d]), size=7) for d in LABEL_DIMS)
                assert np.array_equal(Cells(reader, 0, j)[local], whole[local]), where
    finally:
        cube.close()


@pytest.mark.parametrize("size", [0, 1, 2, 719, 720, 721, 2**21 - 1, 2**21, 2**21 + 3, 5 * 2**20 + 1])
def test_the_numpy_checksum_equals_hdf5_s_fletcher32(size):
    # the reader's checksum (numpy, in pieces of 2**20 words) against the writer's (HDF5's
    # algorithm word by word, compiled), on random bytes and on the all-0xFF worst case
    from paigrid.codecs import fletcher32, fletcher32_numpy

    for data in (np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8), np.full(size, 0xFF, np.uint8)):
        assert fletcher32_numpy(data.tobytes()) == fletcher32(data.tobytes()), size


@pytest.mark.parametrize("size", [0, 1, 2, 3, 719, 720, 721, 11_001, 2**21 + 3])
def test_the_decoder_s_checksum_check_agrees_with_hdf5_s_fletcher32(size):
    # the decoder's check (numcodecs' compiled Fletcher32) against the writer's sums, on odd and
    # even lengths, and a sum one off fails
    import struct

    from paigrid.codecs import _fletcher32_check, fletcher32

    check = _fletcher32_check()
    for data in (np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8), np.full(size, 0xFF, np.uint8)):
        total = fletcher32(data.tobytes())
        assert check(data.tobytes() + struct.pack("<I", total)), size
        assert not check(data.tobytes() + struct.pack("<I", (total + 1) % 2**32)), size
    assert not check(b"abc")


def test_first_of_equivalents_keeps_the_first_finite_cell_an_architecture_ignores():
    # against a loop over every cell, with NaN and inf cells, every kind of architecture
    from paigrid.schema import first_of_equivalents

    names = ["1w1g", "allreduce-local", "ps-worker", "allreduce-cluster"]
    rng = np.random.default_rng(3)
    for shape in [(3, 4, 4, 3, 5), (4, 1, 1), (2, 4, 2, 1)]:
        values = rng.random(shape)
        values[rng.random(shape) < 0.5] = np.nan
        values[rng.random(shape) < 0.05] = np.inf
        arch = names[: shape[-3]]
        expected = values.copy()
        for lead in itertools.product(*map(range, shape[:-3])):
            for a, name in enumerate(arch):
                ignored = ARCH_IGNORES.get(name, ())
                cells = list(itertools.product(range(shape[-2]), range(shape[-1])))
                for i, w in cells:
                    group = [
                        (i2, w2)
                        for i2, w2 in cells
                        if (i2 == i or "intra" in ignored) and (w2 == w or "network" in ignored)
                    ]
                    first = next((c for c in group if np.isfinite(values[(*lead, a, *c)])), None)
                    if ignored and (i, w) != first:
                        expected[(*lead, a, i, w)] = np.nan
        assert np.array_equal(first_of_equivalents(values, arch), expected, equal_nan=True), shape
