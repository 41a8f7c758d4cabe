"""Fuzzing the parsers with hypothesis (derandomized, a fixed number of examples each): spec TOML,
every catalogue CSV, workloads and population CSV, measurements CSV, calibration TOML, the trace
tables and --where filters.  Whatever the input, the command either works or stops with one
sentence: no input may end in "unexpected error" (an exception that is not a PaigridError), a
traceback or an exception class name.

Inputs are built from valid files by mutation (a cell replaced by hostile text, a column dropped
or duplicated, a row cut short) and from small grammars of TOML keys and values, so most examples
get past the first checks and reach the deeper ones.
"""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile_helpers import CLASS_NAME, builtin, csv_rows, csv_text, invoke, make_world

#: a failing example of a whole catalogue has a long repr; hypothesis warns about it, the failure says enough
pytestmark = [pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"), pytest.mark.slow]

FUZZ = settings(
    max_examples=100,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

HOSTILE_CELLS = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "1e400",
            "-1",
            "0",
            "-0",
            "1e-400",
            "3.5",
            "1e9",
            "2147483648",
            "99999999999999999999",
            "0x10",
            "1_000",
            "true",
            "none",
            "V100",
            "pcie>=",
            "pcie>=x",
            "a;b;;",
            "\u00e9",
            "\ufeff",
            "'",
            '"',
            "=1+1",
            "../../etc/passwd",
        ]
    ),
    st.text(max_size=12),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)


def assert_no_surprise(code: int, stdout: str, stderr: str) -> None:
    """Success, or exactly one 'paigrid: error:' sentence; never an unexpected error."""
    assert "unexpected error" not in stderr, stderr
    assert "Traceback" not in stderr, stderr
    if code != 0:
        text = stderr.strip()
        assert len(text.splitlines()) == 1 and text.startswith("paigrid: error: "), stderr
        assert not CLASS_NAME.search(text), text


@st.composite
def mutated_csv(draw, text: str):
    """A valid CSV with a few hostile edits."""
    rows = csv_rows(text)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(["cell", "cell", "cell", "drop-column", "short-row", "duplicate-row", "header-cell"])
        )
        if kind == "cell" and len(rows) > 1:
            r = draw(st.integers(1, len(rows) - 1))
            c = draw(st.integers(0, len(rows[0]) - 1))
            if c < len(rows[r]):
                rows[r][c] = draw(HOSTILE_CELLS)
        elif kind == "drop-column" and len(rows[0]) > 1:
            c = draw(st.integers(0, len(rows[0]) - 1))
            rows = [row[:c] + row[c + 1 :] for row in rows]
        elif kind == "short-row" and len(rows) > 1:
            r = draw(st.integers(1, len(rows) - 1))
            rows[r] = rows[r][: draw(st.integers(0, len(rows[r])))]
        elif kind == "duplicate-row" and len(rows) > 1:
            rows.append(list(rows[draw(st.integers(1, len(rows) - 1))]))
        elif kind == "header-cell":
            rows[0][draw(st.integers(0, len(rows[0]) - 1))] = draw(HOSTILE_CELLS)
    return csv_text(rows)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("fuzz-world"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


PREDICT = [
    "predict",
    "--workload",
    "resnet50",
    "--arch",
    "allreduce-cluster",
    "--gpu",
    "V100",
    "--n-gpu",
    "16",
    "--intra",
    "nvlink2-hcm",
    "--network",
    "eth-25g",
    "--precision",
    "fp32",
]


@pytest.mark.parametrize("kind", ["gpus", "links", "workloads", "optimizers", "precisions"])
def test_fuzzed_catalogues(kind, scratch):
    @FUZZ
    @given(mutated_csv(builtin(f"{kind}.csv")))
    def check(text):
        path = scratch / f"{kind}.csv"
        path.write_text(text, encoding="utf-8")
        assert_no_surprise(*invoke(*PREDICT, "--catalogue", f"{kind}={path}"))

    check()


POPULATION = (
    "job,model,batch,gpus_per_node,current_arch,current_gpu,current_n_gpu,current_intra,current_network,"
    "current_precision,source,overlap,grad_accum_steps,nics_per_node,pcie_roots,ps_count,"
    "input_rate_samples_per_s\n"
    "j1,resnet50,,8,ps-worker,V100,16,pcie3,eth-25g,fp32,t,0,1,1,2,0,inf\n"
    "j2,bert,32,8,1w1g,P100,1,pcie3,eth-25g,fp32,t,0.5,2,1,2,1,1000\n"
    "j3,gcn,,4,allreduce-local,A100,4,nvswitch-nvlink3,none,tf32,t,0,1,2,1,0,\n"
)


def test_fuzzed_population_csv(world, scratch):
    @FUZZ
    @given(mutated_csv(POPULATION))
    def check(text):
        path = scratch / "pop.csv"
        path.write_text(text, encoding="utf-8")
        from paigrid.errors import PaigridError
        from paigrid.inputs.spec import load_spec
        from paigrid.orchestration import prepare

        spec = load_spec(world / "study.toml")
        spec.workloads = str(path)
        try:
            prepare(spec)  # everything a sweep checks before its first block
        except PaigridError as exc:
            assert "\n" not in str(exc) and not CLASS_NAME.search(str(exc)), str(exc)

    check()


def test_fuzzed_workloads_catalogue_as_workloads(world, scratch):
    @FUZZ
    @given(mutated_csv(builtin("workloads.csv")))
    def check(text):
        path = scratch / "wl.csv"
        path.write_text(text, encoding="utf-8")
        from paigrid.errors import PaigridError
        from paigrid.inputs.spec import load_spec
        from paigrid.orchestration import prepare

        spec = load_spec(world / "spec.toml")
        spec.workloads = str(path)
        try:
            prepare(spec)
        except PaigridError as exc:
            assert "\n" not in str(exc) and not CLASS_NAME.search(str(exc)), str(exc)

    check()


def test_fuzzed_measurements(scratch):
    @settings(FUZZ, max_examples=40)
    @given(mutated_csv("\n".join(builtin("measurements_public.csv").splitlines()[:6]) + "\n"))
    def check(text):
        path = scratch / "m.csv"
        path.write_text(text, encoding="utf-8")
        assert_no_surprise(*invoke("validate", path))

    check()


TOML_VALUES = st.recursive(
    st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=True),
        st.booleans(),
        st.sampled_from(
            [
                "fp32",
                "V100",
                "A100-SXM4-80G",
                "nvswitch",
                "pcie",
                "current",
                "pop.csv",
                "x.csv",
                "",
                "resnet50",
                "default",
                "tree",
            ]
        ),
        st.text(max_size=6),
    ),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["a", "fp32", "gpus", "V100"]), inner, max_size=3)
    ),
    max_leaves=8,
)


def toml_text(data: dict) -> str:
    """TOML text of ``data`` (a small writer: tomllib only reads)."""

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return "nan" if v != v else ("inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v))
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            return (
                '"'
                + "".join(
                    "\\" + ch if ch in '"\\' else f"\\u{ord(ch):04x}" if ord(ch) < 0x20 or ch == "\x7f" else ch
                    for ch in v
                )
                + '"'
            )
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{" + ", ".join(f'"{k}" = {value(x)}' for k, x in v.items()) + "}"

    return "".join(f'"{key}" = {value(v)}\n' for key, v in data.items())


SPEC_KEYS = st.sampled_from(["workloads", "jobs_per_block", "grid", "options", "catalogues", "extra"])
GRID = st.fixed_dictionaries(
    {},
    optional={
        "arch": st.lists(
            st.sampled_from(["1w1g", "1wng", "allreduce-local", "ps-worker", "allreduce-cluster", "mesh"]), max_size=3
        ),
        "gpu": st.lists(st.sampled_from(["V100", "A100", "K80", "H100", "V100-SXM2-16GB", "Z80"]), max_size=3),
        "n_gpu": st.one_of(st.just("current"), st.lists(st.integers(-3, 2**40), max_size=3), TOML_VALUES),
        "intra": st.lists(st.sampled_from(["pcie3", "nvlink2-hcm", "eth-25g", "warp"]), max_size=2),
        "network": st.lists(st.sampled_from(["none", "eth-25g", "pcie3"]), max_size=2),
        "precision": st.lists(st.sampled_from(["fp32", "amp-fp16", "fp8", "fp4"]), max_size=2),
        "speed": TOML_VALUES,
    },
)
OPTIONS = st.dictionaries(
    st.sampled_from(
        [
            "collective",
            "topology_aware",
            "grad_accum_steps",
            "overlap",
            "gpus_per_node",
            "nics_per_node",
            "pcie_roots",
            "ps_count",
            "input_rate_samples_per_s",
            "warp",
        ]
    ),
    TOML_VALUES,
    max_size=3,
)


def test_fuzzed_spec_toml(world, scratch):
    @FUZZ
    @given(
        st.fixed_dictionaries(
            {},
            optional={
                "workloads": st.one_of(
                    st.lists(st.sampled_from(["resnet50", "bert", "gcn", "nope"]), max_size=2),
                    st.sampled_from([str(world / "pop.csv"), "missing.csv"]),
                    TOML_VALUES,
                ),
                "jobs_per_block": TOML_VALUES,
                "grid": st.one_of(GRID, TOML_VALUES),
                "options": st.one_of(OPTIONS, TOML_VALUES),
                "catalogues": st.one_of(
                    st.dictionaries(
                        st.sampled_from(["gpus", "links", "cpus"]),
                        st.one_of(st.just(str(world / "gpus.csv")), TOML_VALUES),
                        max_size=2,
                    ),
                    TOML_VALUES,
                ),
                "extra": TOML_VALUES,
            },
        ),
        st.booleans(),
    )
    def check(data, garble):
        text = toml_text(data)
        if garble:
            text = text[: len(text) // 2] + "\x00" if len(text) % 3 == 0 else text.replace("=", "", 1)
        path = scratch / "spec.toml"
        path.write_text(text, encoding="utf-8")
        from paigrid.errors import PaigridError
        from paigrid.inputs.spec import load_spec
        from paigrid.orchestration import prepare

        try:
            prepare(load_spec(path))
        except PaigridError as exc:
            assert "\n" not in str(exc) and not CLASS_NAME.search(str(exc)), str(exc)

    check()


def test_fuzzed_calibration_toml(scratch):
    @FUZZ
    @given(
        st.dictionaries(
            st.sampled_from(["flop_efficiency", "memory_efficiency", "link_efficiency", "options", "fit", "speed"]),
            st.one_of(
                st.dictionaries(
                    st.sampled_from(
                        [
                            "fp32",
                            "tf32",
                            "V100/fp32",
                            "A100-SXM4-80G/tf32",
                            "fp23",
                            "default",
                            "V100",
                            "nvswitch",
                            "nvswich",
                            "pcie",
                            "eth-25g",
                            "overlap",
                            "grad_accum_steps",
                            "a/b/c",
                            "/fp32",
                            "V100/",
                        ]
                    ),
                    TOML_VALUES,
                    max_size=3,
                ),
                TOML_VALUES,
            ),
            max_size=3,
        )
    )
    def check(data):
        path = scratch / "calib.toml"
        path.write_text(toml_text(data), encoding="utf-8")
        assert tomllib.loads(path.read_text()) is not None
        assert_no_surprise(*invoke(*PREDICT, "--calibration", path))

    check()


def test_fuzzed_where_filters(world):
    @FUZZ
    @given(
        st.lists(
            st.one_of(
                st.tuples(
                    st.sampled_from(["gpu", "n_gpu", "arch", "intra", "network", "precision", "job", "", " gpu"]),
                    st.sampled_from(["=", "==", "!=", ":", ""]),
                    st.one_of(HOSTILE_CELLS, st.sampled_from(["V100", "1,8", "8", "fp32,fp32", "ps-worker", ","])),
                ).map("".join),
                st.text(max_size=10),
            ),
            min_size=1,
            max_size=3,
        )
    )
    def check(items):
        args = ["query", world / "cube.h5", "--best-arch"]
        for item in items:
            if item.startswith("-"):
                item = " " + item
            args += ["--where", item]
        assert_no_surprise(*invoke(*args))

    check()


TRACE_TABLES = (
    "pai_job_table.csv",
    "pai_task_table.csv",
    "pai_instance_table.csv",
    "pai_group_tag_table.csv",
    "pai_machine_spec.csv",
)


def test_fuzzed_trace_tables(scratch):
    from hostile_helpers import TRACE

    rich = {
        "pai_job_table.csv": TRACE["pai_job_table.csv"]
        + [["j2", "i2", "u1", "Running", "1", "2"], ["j3", "i3", "u2", "Failed", "1", "2"]],
        "pai_task_table.csv": TRACE["pai_task_table.csv"]
        + [
            ["j2", "ps", "1", "Running", "1", "2", "600", "29.3", "", ""],
            ["j2", "worker", "4", "Running", "1", "2", "600", "29.3", "50", "P100"],
            ["j3", "tensorflow", "1", "Failed", "1", "2", "600", "29.3", "800", "V100M32"],
        ],
        "pai_instance_table.csv": TRACE["pai_instance_table.csv"],
        "pai_group_tag_table.csv": TRACE["pai_group_tag_table.csv"] + [["i2", "u1", "", "g1", "resnet"]],
        "pai_machine_spec.csv": TRACE["pai_machine_spec.csv"] + [["m2", "P100", "64", "512", "2"]],
    }

    @FUZZ
    @given(
        st.sampled_from(TRACE_TABLES).flatmap(
            lambda table: st.tuples(st.just(table), mutated_csv(csv_text(rich[table])))
        )
    )
    def check(mutation):
        table, text = mutation
        folder = scratch / "trace"
        folder.mkdir(exist_ok=True)
        for name in TRACE_TABLES:
            (folder / name).write_text(text if name == table else csv_text(rich[name]), encoding="utf-8")
        assert_no_surprise(*invoke("trace", "import", folder, "--out", scratch / "trace.csv"))

    check()


def test_the_fuzzers_can_see_a_surprise():
    """The check used above fails on what a crash looks like."""
    with pytest.raises(AssertionError):
        assert_no_surprise(3, "", "paigrid: unexpected error: KeyError: 'latency_us' (set PAIGRID_DEBUG=1 ...).\n")
    with pytest.raises(AssertionError):
        assert_no_surprise(2, "", "Traceback (most recent call last):\n  ...\nValueError: x\n")
    assert_no_surprise(2, "", "paigrid: error: the spec file s.toml is not valid TOML.\n")


def test_the_unmutated_inputs_work(world, scratch):
    """The fuzzers start from inputs that work, so their mutations reach the deep checks."""
    for kind in ("gpus", "links", "workloads", "optimizers", "precisions"):
        path = scratch / f"base-{kind}.csv"
        path.write_text(builtin(f"{kind}.csv"), encoding="utf-8")
        code, _, stderr = invoke(*PREDICT, "--catalogue", f"{kind}={path}")
        assert code == 0, stderr
    (scratch / "base-pop.csv").write_text(POPULATION, encoding="utf-8")
    from paigrid.inputs.spec import load_spec
    from paigrid.orchestration import prepare

    spec = load_spec(world / "study.toml")
    spec.workloads = str(scratch / "base-pop.csv")
    prepare(spec)
    code, _, stderr = invoke("validate", world / "measurements.csv")
    assert code == 0, stderr
    code, _, stderr = invoke("query", world / "cube.h5", "--best-arch", "--where", "gpu=V100", "--where", "n_gpu=8")
    assert code == 0, stderr
    code, _, stderr = invoke("trace", "import", world / "trace", "--out", scratch / "base-trace.csv")
    assert code == 0, stderr
    (scratch / "base-calib.toml").write_text(
        '[flop_efficiency]\n"A100-SXM4-80G/tf32" = 0.5\n[link_efficiency]\nnvswitch = 0.4\n', encoding="utf-8"
    )
    code, _, stderr = invoke(*PREDICT, "--calibration", scratch / "base-calib.toml")
    assert code == 0, stderr
