"""Tests of paigrid.study.trace: importing the Alibaba PAI GPU trace 2020 and writing populations."""

import csv
import os
from pathlib import Path

import pytest

from paigrid.inputs.catalog import load
from paigrid.study import trace
from paigrid.study.population import POPULATION_COLUMNS

DATA = Path(__file__).parent / "data"
MACHINE_SAMPLE = DATA / "pai_machine_spec_sample.csv"

GPU_NAMES = set(load("gpus").names)
MODEL_NAMES = set(load("workloads").names)


def _write(path, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def _sample_machines():
    """The real machine table sample, without its added header line."""
    with open(MACHINE_SAMPLE, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == list(trace.TABLE_COLUMNS["pai_machine_spec.csv"])
    return rows[1:]


def _machine_of(gpu_type):
    return next(r[0] for r in _sample_machines() if r[1] == gpu_type)


class Trace:
    """Builds the five headerless trace tables of a fixture in a directory."""

    def __init__(self, directory):
        self.dir = directory
        self.jobs, self.tasks, self.instances, self.tags = [], [], [], []

    def job(self, name, tasks, status="Terminated", workload=None, instances=()):
        """tasks: (task_name, inst_num, plan_gpu, gpu_type); instances: (task_name, machine)."""
        inst_id = "inst-" + name
        self.jobs.append([name, inst_id, "user1", status, "100", "200"])
        for task_name, inst_num, plan_gpu, gpu_type in tasks:
            self.tasks.append([name, task_name, inst_num, status, "100", "200", "600", "29.3", plan_gpu, gpu_type])
        for i, (task_name, machine) in enumerate(instances):
            self.instances.append([name, task_name, f"in{i}", f"w{i}", inst_id, status, "100", "200", machine])
        if workload is not None:
            self.tags.append([inst_id, "user1", "", "group1", workload])
        return self

    def write(self):
        _write(self.dir / "pai_job_table.csv", self.jobs)
        _write(self.dir / "pai_task_table.csv", self.tasks)
        _write(self.dir / "pai_instance_table.csv", self.instances)
        _write(self.dir / "pai_group_tag_table.csv", self.tags)
        _write(self.dir / "pai_machine_spec.csv", _sample_machines())
        return self.dir


@pytest.fixture
def fixture_trace(tmp_path):
    t = Trace(tmp_path)
    t.job("j1w1g", [("worker", "1", "100", "P100")], workload="bert")
    t.job("j1wng", [("tensorflow", "1", "400", "V100")])
    t.job("jlocal", [("HorovodWorker", "1", "800", "V100M32")], workload="nmt")
    t.job("jps", [("ps", "2", "", ""), ("worker", "4", "100", "MISC")], workload="ctr")
    t.job("jcluster", [("worker", "3", "100", "T4"), ("chief", "1", "100", "T4")], workload="graphlearn")
    t.job("jfailed", [("worker", "1", "100", "V100")], status="Failed")
    t.job("jcpu", [("worker", "2", "", "")])
    t.job("jcputype", [("worker", "1", "100", "CPU")])
    t.job("jfrac", [("worker", "1", "50", "T4")], workload="some-new-tag")
    t.job("jrunning", [("worker", "1", "100", "P100")], status="Running", workload="resnet")
    t.job("junknown", [("worker", "1", "100", "A800")])
    t.job("jnotasks", [])
    t.job("jbig", [("worker", "1", "400", "P100")])  # 4 GPUs on a 2-GPU machine type
    t.job("jfallback", [("worker", "1", "200", "")], instances=[("worker", _machine_of("V100"))])
    t.tasks.append(["orphan", "worker", "1", "Terminated", "1", "2", "600", "29", "100", "T4"])
    return t.write()


def _by_job(rows):
    return {r["job"]: r for r in rows}


def test_every_architecture_and_field(fixture_trace):
    rows, counts = trace.import_pai_trace(fixture_trace)
    got = _by_job(rows)
    expect = {  # job: (arch, n_gpu, gpu, gpus_per_node, model)
        "j1w1g": ("1w1g", 1, "P100-PCIe-16GB", 2, "bert"),
        "j1wng": ("1wng", 4, "V100-SXM2-16GB", 8, "resnet50"),
        "jlocal": ("allreduce-local", 8, "V100-SXM2-32GB", 8, "nmt"),
        "jps": ("ps-worker", 4, "K80", 8, "multi-interests"),
        "jcluster": ("allreduce-cluster", 4, "T4", 2, "gcn"),
        "jfrac": ("1w1g", 1, "T4", 2, "resnet50"),
        "jrunning": ("1w1g", 1, "P100-PCIe-16GB", 2, "resnet50"),
        "jfallback": ("1wng", 2, "V100-SXM2-16GB", 8, "resnet50"),
    }
    assert set(got) == set(expect)
    for job, (arch, n, gpu, gpn, model) in expect.items():
        r = got[job]
        assert list(r) == list(POPULATION_COLUMNS)
        assert (r["current_arch"], r["current_n_gpu"], r["current_gpu"], r["gpus_per_node"], r["model"]) == (
            arch,
            n,
            gpu,
            gpn,
            model,
        ), job
        assert r["current_precision"] == "fp32"
        assert r["current_intra"] == "pcie3"
        assert r["current_network"] == "eth-25g"
        assert r["batch"] == ""
        defaulted = job in ("j1wng", "jfrac", "jfallback")  # no tag, or a tag of no family
        assert r["source"] == (trace.SOURCE_DEFAULTED if defaulted else "pai-trace-2020"), job
    assert [r["job"] for r in rows] == [
        j for j in ("j1w1g", "j1wng", "jlocal", "jps", "jcluster", "jfrac", "jrunning", "jfallback")
    ]


def test_counts(fixture_trace):
    _, counts = trace.import_pai_trace(fixture_trace)
    assert set(counts) == set(trace.COUNT_KEYS)
    assert counts["jobs_read"] == 14
    assert counts["imported"] == 8
    assert counts["skipped_failed"] == 1
    assert counts["skipped_cpu_only"] == 2
    assert counts["skipped_unknown_gpu"] == 1
    assert counts["skipped_no_tasks"] == 1
    assert counts["skipped_inconsistent"] == 1
    assert counts["kept_not_terminated"] == 1
    assert counts["fractional_gpu_rounded"] == 1
    assert counts["gpu_type_from_machine"] == 1
    assert counts["model_from_tag"] == 5
    assert counts["model_default"] == 3
    assert counts["tasks_without_job"] == 1
    assert counts["arch_1w1g"] == 3 and counts["arch_allreduce-cluster"] == 1
    skipped = sum(v for k, v in counts.items() if k.startswith("skipped_"))
    assert counts["jobs_read"] == counts["imported"] + skipped
    text = trace.format_counts(counts)
    assert text.splitlines()[0] == "jobs_read: 14"
    assert "skipped_failed: 1" in text


def test_imported_rows_are_valid(fixture_trace):
    rows, _ = trace.import_pai_trace(fixture_trace)
    for r in rows:
        n, gpn = r["current_n_gpu"], r["gpus_per_node"]
        if r["current_arch"] == "1w1g":
            assert n == 1
        if r["current_arch"] in ("1wng", "allreduce-local"):
            assert n <= gpn
        if r["current_arch"] in ("ps-worker", "allreduce-cluster"):
            assert r["current_network"] != "none"
        assert r["current_gpu"] in GPU_NAMES
        assert r["model"] in MODEL_NAMES


def test_gpus_per_node_from_real_machine_table(tmp_path):
    t = Trace(tmp_path)
    for gtype in ("P100", "T4", "V100", "V100M32", "MISC"):
        t.job("j" + gtype, [("worker", "1", "100", gtype)])
    rows, counts = trace.import_pai_trace(t.write())
    gpn = {r["job"][1:]: r["gpus_per_node"] for r in rows}
    assert gpn == {"P100": 2, "T4": 2, "V100": 8, "V100M32": 8, "MISC": 8}
    assert counts["gpus_per_node_default"] == 0


@pytest.mark.parametrize("gtype", sorted(trace.GPU_TYPE_TO_CATALOGUE))
def test_every_gpu_type_mapping(tmp_path, gtype):
    t = Trace(tmp_path)
    t.job("j", [("worker", "1", "100", gtype.lower())])  # case does not matter
    rows, _ = trace.import_pai_trace(t.write())
    assert rows[0]["current_gpu"] == trace.GPU_TYPE_TO_CATALOGUE[gtype]
    assert rows[0]["current_gpu"] in GPU_NAMES


@pytest.mark.parametrize("workload", sorted(trace.WORKLOAD_TO_MODEL))
def test_every_workload_mapping(tmp_path, workload):
    t = Trace(tmp_path)
    t.job("j", [("worker", "1", "100", "V100")], workload=workload.upper())
    rows, counts = trace.import_pai_trace(t.write())
    assert rows[0]["model"] == trace.WORKLOAD_TO_MODEL[workload]
    assert rows[0]["model"] in MODEL_NAMES
    assert counts["model_from_tag"] == 1


def test_catalogue_name_tag_and_default_model(tmp_path):
    t = Trace(tmp_path)
    t.job("jname", [("worker", "1", "100", "V100")], workload="resnet101")
    t.job("jother", [("worker", "1", "100", "V100")], workload="unheard-of")
    t.job("jnone", [("worker", "1", "100", "V100")])
    rows, counts = trace.import_pai_trace(t.write())
    assert [r["model"] for r in rows] == ["resnet101", trace.DEFAULT_MODEL, trace.DEFAULT_MODEL]
    assert trace.DEFAULT_MODEL in MODEL_NAMES
    assert counts["model_default"] == 2


def test_every_tag_maps_to_a_zoo_family():
    described = {w for workloads in trace.zoo_families().values() for w in workloads}
    assert set(trace.WORKLOAD_TO_MODEL.values()) <= described
    assert trace.zoo_families()["resnet"][0] == trace.DEFAULT_MODEL == trace.default_model(None)


def test_chosen_default_family(tmp_path):
    t = Trace(tmp_path)
    t.job("jtag", [("worker", "1", "100", "V100")], workload="bert")
    t.job("jother", [("worker", "1", "100", "V100")], workload="unheard-of")
    t.job("jnone", [("worker", "1", "100", "V100")])
    folder = t.write()
    for family, model in (
        ("bert", trace.zoo_families()["bert"][0]),
        ("transformer", "transformer"),
        ("gcn", "gcn"),
        ("vgg16", "vgg16"),
    ):
        rows, counts = trace.import_pai_trace(folder, default_family=family)
        assert [r["model"] for r in rows] == ["bert", model, model], family
        assert [r["source"] for r in rows] == ["pai-trace-2020", trace.SOURCE_DEFAULTED, trace.SOURCE_DEFAULTED]
        assert counts["model_default"] == 2 and counts["model_from_tag"] == 1
    with pytest.raises(ValueError, match="unknown default family 'no-such'"):
        trace.import_pai_trace(folder, default_family="no-such")


def test_mapping_targets_are_catalogue_names():
    assert set(trace.GPU_TYPE_TO_CATALOGUE.values()) <= GPU_NAMES
    assert set(trace.WORKLOAD_TO_MODEL.values()) <= MODEL_NAMES


def test_gpu_rounding_and_mixed_types(tmp_path):
    t = Trace(tmp_path)
    t.job("j150", [("worker", "2", "150", "V100")])  # 2 instances x ceil(1.5) = 4 GPUs
    t.job("jmix", [("worker", "1", "25.0", "T4"), ("worker2", "4", "100.0", "V100")])
    rows, counts = trace.import_pai_trace(t.write())
    got = _by_job(rows)
    assert got["j150"]["current_n_gpu"] == 4
    assert got["j150"]["current_arch"] == "allreduce-cluster"
    assert got["jmix"]["current_n_gpu"] == 5
    assert got["jmix"]["current_gpu"] == "V100-SXM2-16GB"  # the type with most GPUs
    assert counts["fractional_gpu_rounded"] == 2


@pytest.mark.parametrize(
    "names,instances,n_gpu,arch",
    [
        (["ps", "worker"], 4, 4, "ps-worker"),
        (["PS", "worker", "evaluator"], 5, 5, "ps-worker"),
        (["worker"], 1, 1, "1w1g"),
        (["tensorflow"], 1, 4, "1wng"),
        (["PyTorchWorker"], 1, 4, "1wng"),
        (["OpenmpiTracker"], 1, 4, "allreduce-local"),
        (["nccl_allreduce"], 1, 2, "allreduce-local"),
        (["worker"], 2, 2, "allreduce-cluster"),
        (["ps"], 1, 1, "1w1g"),
    ],
)
def test_job_arch_rules(names, instances, n_gpu, arch):
    assert trace.job_arch(names, names, instances, n_gpu) == arch


def test_header_line_is_tolerated(tmp_path):
    t = Trace(tmp_path)
    t.job("j", [("worker", "1", "100", "P100")])
    t.jobs.insert(0, list(trace.TABLE_COLUMNS["pai_job_table.csv"]))
    t.tasks.insert(0, list(trace.TABLE_COLUMNS["pai_task_table.csv"]))
    t.write()
    _write(
        tmp_path / "pai_machine_spec.csv",
        [["machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"]] + _sample_machines(),
    )
    rows, counts = trace.import_pai_trace(tmp_path)
    assert counts["jobs_read"] == 1 and rows[0]["gpus_per_node"] == 2


@pytest.mark.parametrize("table", sorted(trace.TABLE_COLUMNS))
def test_missing_table(tmp_path, table):
    t = Trace(tmp_path)
    t.job("j", [("worker", "1", "100", "P100")])
    t.write()
    os.remove(tmp_path / table)
    with pytest.raises(ValueError, match=table):
        trace.import_pai_trace(tmp_path)


def test_short_row(tmp_path):
    t = Trace(tmp_path)
    t.job("j", [("worker", "1", "100", "P100")])
    t.job("k", [("worker", "1", "100", "P100")])
    t.tasks[1] = t.tasks[1][:7]
    t.write()
    with pytest.raises(ValueError, match=r"pai_task_table\.csv line 2: expected 10 columns"):
        trace.import_pai_trace(tmp_path)


def test_non_numeric_field(tmp_path):
    t = Trace(tmp_path)
    t.job("j", [("worker", "one", "100", "P100")])
    t.write()
    with pytest.raises(ValueError, match=r"pai_task_table\.csv line 1: column inst_num"):
        trace.import_pai_trace(tmp_path)


def test_write_population_round_trip(fixture_trace, tmp_path):
    rows, _ = trace.import_pai_trace(fixture_trace)
    out = tmp_path / "out" / "pop.csv"
    out.parent.mkdir()
    trace.write_population(rows, out)
    with open(out, newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == POPULATION_COLUMNS
        back = list(reader)
    assert back == [{k: str(v) for k, v in r.items()} for r in rows]
    assert os.listdir(out.parent) == ["pop.csv"]


def test_write_population_bad_row_leaves_old_file(tmp_path):
    out = tmp_path / "pop.csv"
    out.write_text("old\n")
    good = dict.fromkeys(POPULATION_COLUMNS, "x")
    with pytest.raises(ValueError, match="wrong columns"):
        trace.write_population([good, {"job": "a"}], out)
    assert out.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["pop.csv"]
