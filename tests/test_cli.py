"""Command-line behaviour, bad input included: one clear sentence, a non-zero exit, no traceback."""

import json

import pytest

from cli_helpers import assert_clean_error, run

SMALL = ["--workloads", "resnet50,bert-base", "--quiet"]
SPEC = """
[grid]
gpu = ["V100", "A100"]
n_gpu = [1, 8, 16]
intra = ["pcie3", "nvlink2-hcm", "nvswitch-nvlink3"]
network = ["none", "eth-25g", "eth-100g"]
precision = ["fp32", "amp-fp16"]
"""


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    (folder / "spec.toml").write_text(SPEC)
    result = run("sweep", folder / "spec.toml", "--out", folder / "cube.h5", *SMALL)
    assert result.exit_code == 0, result.output
    return folder / "cube.h5"


def test_query_best_arch_prints_one_row_per_job(cube):
    result = run("query", cube, "--best-arch")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[:4] == ["job", "arch", "intra", "network"]
    assert [line.split()[0] for line in lines[1:]] == ["resnet50", "bert-base"]


def test_query_json_and_csv(cube):
    rows = json.loads(run("query", cube, "--best-arch", "--json", "--where", "gpu=V100").output)
    assert {r["gpu"] for r in rows} == {"V100-SXM2-16GB"}
    assert {"step_time", "throughput", "throughput_tokens", "bottleneck", "speedup"} <= set(rows[0])
    csv_out = run("query", cube, "--best-arch", "--csv", "--by", "cost", "--job", "bert-base").output
    assert csv_out.splitlines()[0].startswith("job,model,arch,intra,network")
    assert len(csv_out.strip().splitlines()) == 2


def test_info_shows_dimensions_and_completeness(cube):
    result = run("info", cube)
    assert result.exit_code == 0
    assert "status: complete" in result.output and "n_gpu" in result.output and "[s]" in result.output


def test_predict_json_gives_the_breakdown():
    result = run(
        "predict",
        "--workload",
        "ResNet-50",
        "--arch",
        "allreduce-local",
        "--gpu",
        "V100",
        "--n-gpu",
        8,
        "--intra",
        "nvlink2-hcm",
        "--network",
        "none",
        "--precision",
        "amp-fp16",
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("step_time", "t_data", "t_flop", "t_mem", "t_comm", "throughput", "bottleneck", "cost", "energy"):
        assert key in data
    components = data["t_data"] + data["t_flop"] + data["t_mem"] + data["t_comm"]
    assert data["step_time"] == pytest.approx(components, rel=1e-5)


def test_catalogues_lists_the_catalogues():
    result = run("catalogues")
    assert result.exit_code == 0 and "gpus" in result.output and "workloads" in result.output
    assert "V100-SXM2-16GB" in run("catalogues", "gpus").output


@pytest.mark.parametrize("args", [[], ["gpus"], ["links", "--csv"]])
def test_the_old_name_datasets_prints_the_same_with_one_note_on_stderr(args):
    """``paigrid datasets`` (the name before ``catalogues``) still works for users' scripts: the
    same stdout, one line on stderr naming the new command, and it is not in the help."""
    new, old = run("catalogues", *args), run("datasets", *args)
    assert (new.exit_code, old.exit_code) == (0, 0), old.output
    assert old.stdout == new.stdout and new.stderr == ""
    assert old.stderr.splitlines() == [
        "paigrid: note: `paigrid datasets` is now `paigrid catalogues`; the old name will go."
    ]
    listed = run("--help").output
    assert "catalogues" in listed and "datasets" not in listed


def test_the_old_name_datasets_refuses_bad_input_as_catalogues_does():
    """Bad input to the old name: its note, then the one sentence of ``catalogues``, the same exit."""
    new, old = run("catalogues", "cpus"), run("datasets", "cpus")
    assert old.exit_code == new.exit_code == 2 and old.stdout == new.stdout == ""
    assert old.stderr.splitlines() == [
        "paigrid: note: `paigrid datasets` is now `paigrid catalogues`; the old name will go.",
        *new.stderr.splitlines(),
    ]
    assert len(new.stderr.splitlines()) == 1 and new.stderr.startswith("paigrid: error: unknown catalogue 'cpus'")


def test_unknown_gpu_lists_close_matches():
    result = run(
        "predict",
        "--workload",
        "resnet50",
        "--arch",
        "1w1g",
        "--gpu",
        "V10O",
        "--n-gpu",
        1,
        "--intra",
        "pcie3",
        "--network",
        "none",
        "--precision",
        "fp32",
    )
    assert_clean_error(result, "unknown gpu 'V10O'", "V100")


def test_invalid_configuration_says_why():
    result = run(
        "predict",
        "--workload",
        "resnet50",
        "--arch",
        "1w1g",
        "--gpu",
        "V100",
        "--n-gpu",
        4,
        "--intra",
        "pcie3",
        "--network",
        "none",
        "--precision",
        "fp32",
    )
    assert_clean_error(result, "exactly one GPU")


def test_malformed_toml(tmp_path):
    (tmp_path / "bad.toml").write_text("[grid\ngpu = [")
    assert_clean_error(run("sweep", tmp_path / "bad.toml", "--out", tmp_path / "c.h5"), "not valid TOML")
    assert not (tmp_path / "c.h5").exists()


def test_negative_values_are_refused(tmp_path):
    assert_clean_error(run("sweep", "--out", tmp_path / "c.h5", "--option", "overlap=-0.5"), "overlap")
    (tmp_path / "spec.toml").write_text("[grid]\nn_gpu = [-4]\n")
    assert_clean_error(run("sweep", tmp_path / "spec.toml", "--out", tmp_path / "c.h5"), "n_gpu")
    header = (
        "name,aliases,suite,domain,params_M,fwd_GFLOP_per_sample,membound_MB_per_sample,input_MB_per_sample,"
        "activation_MB_per_sample,default_batch,optimizer,sample_unit,tokens_per_sample,params_source,"
        "flops_source,estimation_notes\n"
    )
    (tmp_path / "w.csv").write_text(header + "mine,,other,vision,-25,4,100,0.15,100,32,momentum,image,1,x,x,x\n")
    assert_clean_error(run("sweep", "--workloads", tmp_path / "w.csv", "--out", tmp_path / "c.h5"), "params_M")
    assert not list(tmp_path.glob("c.h5*"))


def test_unwritable_output_path(tmp_path):
    (tmp_path / "a-file").write_text("")
    assert_clean_error(run("sweep", "--out", tmp_path / "a-file" / "cube.h5", *SMALL), "does not exist")
    assert_clean_error(run("sweep", "--out", tmp_path, *SMALL), "is a folder")


def test_bad_where_and_missing_cube(cube, tmp_path):
    assert_clean_error(run("query", cube, "--best-arch", "--where", "gpu=Z80"), "gpu=Z80 is not in the cube")
    assert_clean_error(run("query", cube, "--best-arch", "--where", "__import__('os')"), "DIM=VALUE")
    assert_clean_error(run("query", tmp_path / "none.h5", "--best-arch"), "no cube")
    assert_clean_error(run("query", cube), "--best-arch")


def test_query_checks_the_calibration_of_the_cube(cube, tmp_path):
    calibration = tmp_path / "calib.toml"
    calibration.write_text('[class_efficiency]\n"gemm_conv/*/amp" = 0.4\n')
    assert_clean_error(run("query", cube, "--best-arch", "--calibration", calibration), "default efficiencies")
    folder = cube.parent
    result = run(
        "sweep", folder / "spec.toml", "--out", tmp_path / "calibrated.h5", "--calibration", calibration, *SMALL
    )
    assert result.exit_code == 0, result.output
    assert run("query", tmp_path / "calibrated.h5", "--best-arch", "--calibration", calibration).exit_code == 0
    default = json.loads(run("query", cube, "--best-arch", "--json", "--where", "precision=amp-fp16").output)
    slower = json.loads(
        run("query", tmp_path / "calibrated.h5", "--best-arch", "--json", "--where", "precision=amp-fp16").output
    )
    assert all(s["throughput"] <= d["throughput"] for s, d in zip(slower, default))
    assert any(s["throughput"] < d["throughput"] for s, d in zip(slower, default))


def test_user_catalogue_replaces_the_built_in_one(tmp_path):
    from paigrid.inputs.catalog import builtin_text

    lines = builtin_text("gpus").splitlines()
    mine = [lines[0]] + [
        line.replace("V100-SXM2-16GB,", "MyGPU,", 1) for line in lines[1:] if line.startswith("V100-SXM2-16GB,")
    ]
    (tmp_path / "gpus.csv").write_text("\n".join(mine) + "\n")
    args = [
        "predict",
        "--workload",
        "resnet50",
        "--arch",
        "1w1g",
        "--n-gpu",
        1,
        "--intra",
        "pcie3",
        "--network",
        "none",
        "--precision",
        "fp32",
        "--json",
    ]
    mine_result = run(*args, "--gpu", "MyGPU", "--catalogue", f"gpus={tmp_path / 'gpus.csv'}")
    assert mine_result.exit_code == 0, mine_result.output
    builtin = json.loads(run(*args, "--gpu", "V100-SXM2-16GB").output)
    assert json.loads(mine_result.output)["step_time"] == builtin["step_time"]
    assert_clean_error(run(*args, "--gpu", "A100", "--catalogue", f"gpus={tmp_path / 'gpus.csv'}"), "unknown gpu")
    assert_clean_error(run(*args, "--gpu", "V100", "--catalogue", "chips=x.csv"), "--catalogue")


def test_query_pareto_lists_each_jobs_front(cube):
    rows = json.loads(run("query", cube, "--pareto", "--json", "--job", "resnet50").output)
    assert rows and all(r["job"] == "resnet50" for r in rows)
    times = [r["step_time"] / (r["n_gpu"] * 64) for r in rows]
    costs = [r["cost"] for r in rows]
    assert times == sorted(times) and costs == sorted(costs, reverse=True)
    assert_clean_error(run("query", cube, "--pareto", "--top", 2), "--pareto")
    assert_clean_error(run("query", cube, "--pareto", "--best-arch"), "--best-arch or --pareto")


def test_a_typer_whose_internals_differ_keeps_its_own_coercion(monkeypatch):
    """``arguments._defer_coercion`` relies on typer's private ``RuntimeParam``; where building
    it fails (another typer's signature), the parameter keeps typer's own coercion."""
    from paigrid.cli import arguments

    class Other:
        def __init__(self, *args, **kwargs):
            raise TypeError("another signature")

    class Descriptor:
        file_annotation = None
        parameter_info = None
        annotation = int

    class Param:
        type_descriptor = Descriptor()
        _runtime_param = None

    monkeypatch.setattr(arguments, "_deferred_class", lambda: Other)
    param = Param()
    arguments._defer_coercion(param)
    assert param._runtime_param is None


def test_plain_answers_are_what_typers_validator_gives():
    """The deferred coercion (``arguments._plain_value``) answers a plain value with exactly
    what typer's own validator gives, lists included, and asks the validator for the rest."""
    typer_coercion = pytest.importorskip("typer._coercion", reason="typer before 0.29 has no validators to spare")
    from enum import StrEnum
    from pathlib import Path

    import click
    import typer

    from paigrid.cli import arguments

    class Colour(StrEnum):
        red = "red"
        blue = "blue"

    app = typer.Typer()

    @app.command()
    def main(
        word: str = "w",
        count: int = typer.Option(1, min=0, max=9),
        share: float = 0.5,
        path: Path = Path("."),
        colour: Colour = Colour.red,
        words: list[str] | None = typer.Option(None),
        counts: list[int] | None = typer.Option(None),
        paths: list[Path] | None = typer.Option(None),
    ):
        pass  # only its options are read

    command = typer.main.get_command(app)
    ctx = click.Context(command)
    params = {param.name: param for param in command.params}
    answered, asked = "answered", "asked"  # by the deferred coercion, or by typer's validator
    cases = [
        ("word", "resnet50", answered),
        ("word", "ll\u00e4ma", asked),
        ("count", "3", answered),
        ("count", "10", asked),  # beyond max: typer words the refusal
        ("count", "03", asked),
        ("share", "0.25", answered),
        ("share", "1e3", answered),
        ("share", "+1", asked),
        ("path", "cube.h5", answered),
        ("path", "a\u00e9.h5", asked),
        ("colour", "blue", answered),
        ("words", (), answered),
        ("words", ("llama3-8b",), answered),
        ("words", ("network=eth-25g", "precision=fp32"), answered),
        ("words", ("ok", "n\u00e4"), asked),
        ("counts", ("1", "2"), answered),
        ("counts", ("1", "x"), asked),
        ("paths", ("a.h5", "b.h5"), answered),
    ]
    for name, value, who in cases:
        param = params[name]
        descriptor = param.type_descriptor
        plain = arguments._plain_value(descriptor.annotation, descriptor.parameter_info, value, param, ctx)
        assert (plain is not arguments._ASK) == (who == answered), (name, value, plain)
        if who == answered:
            expected = typer_coercion.build_runtime_param(descriptor)._coerce_value(value, param=param, ctx=ctx)
            assert plain == expected and type(plain) is type(expected), (name, value, plain, expected)
            if isinstance(plain, list):
                assert [type(item) for item in plain] == [type(item) for item in expected], (name, value)
