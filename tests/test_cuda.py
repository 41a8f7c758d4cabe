"""``--device cuda``: the numba.cuda kernels give the CPU kernel's outputs, checked through numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, set in a subprocess before numba.cuda is imported), so
no GPU is needed; the command without a GPU says so in one sentence; the cube says which device
made it."""

import os
import subprocess
import sys

import h5py
import pytest

from cli_helpers import assert_clean_error, run
from cube_compare import assert_same_cube
from cuda_helpers import compile_ptx, run_simulator_checks
from paigrid.errors import PaigridError
from paigrid.inputs.spec import spec_from_dict
from paigrid.schema import partial_path

PAIGRID = [sys.executable, "-c", "from paigrid.cli import main; main()"]

SPEC = """
workloads = ["resnet50", "gpt2-medium", "bert-large-seq384"]
jobs_per_block = 2
{device}
[grid]
gpu = ["V100", "H100"]
n_gpu = [1, 8, 64]
intra = ["pcie3", "nvswitch-nvlink4"]
network = ["none", "eth-100g"]
precision = ["fp32", "fp8"]
"""


def simulated(*args, **env):
    """Run ``paigrid ARGS`` in a subprocess with numba's CUDA simulator on."""
    return subprocess.run(
        [*PAIGRID, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1", **env},
    )


@pytest.mark.cuda_sim
def test_cuda_kernels_give_the_cpu_outputs_in_the_simulator():
    # both compute models, every option that changes a formula (the parameter-server options and the
    # ring inter-server volume on workloads with sparse embeddings included), NaN inputs; full cube
    # and reduce-only
    stdout = run_simulator_checks("cuda_sim_checks.py")
    assert "ok missing input numbers (full)" in stdout, stdout
    assert "ok missing input numbers, every ps option (full)" in stdout, stdout
    assert stdout.count("16 outputs equal") == 14 and stdout.count("9 outputs equal") == 12, stdout
    assert stdout.count(" exercised: ") == 5, stdout
    assert "ok run_cuda over several launches" in stdout, stdout


def test_launches_group_consecutive_blocks_up_to_a_size():
    from paigrid.cuda_sweep import launches

    blocks = [(0, 4), (4, 8), (8, 12), (12, 14)]
    assert launches(blocks, [0, 1, 2, 3], 8) == [[0, 1], [2, 3]]
    assert launches(blocks, [0, 2, 3], 100) == [[0], [2, 3]]  # a gap (blocks already written): a new launch
    assert launches(blocks, [0, 1], 3) == [[0], [1]]  # a block larger than the limit: on its own


@pytest.mark.cuda_sim
def test_sweep_on_cuda_writes_the_cpu_cube(tmp_path):
    cpu_spec, gpu_spec = tmp_path / "cpu.toml", tmp_path / "gpu.toml"
    cpu_spec.write_text(SPEC.format(device=""))
    gpu_spec.write_text(SPEC.format(device='device = "cuda"'))
    for reduce_only in (False, True):
        flag = ["--reduce-only"] if reduce_only else []
        cpu, gpu = tmp_path / f"cpu{reduce_only}.h5", tmp_path / f"gpu{reduce_only}.h5"
        assert run("sweep", cpu_spec, "--out", cpu, "-q", *flag).exit_code == 0
        # full: --device on the command line; reduce-only: the spec's device key
        done = simulated(
            "sweep",
            cpu_spec if not reduce_only else gpu_spec,
            "--out",
            gpu,
            "-q",
            *flag,
            *(["--device", "cuda"] if not reduce_only else []),
        )
        assert done.returncode == 0, done.stderr
        assert_same_cube(cpu, gpu)
        info = run("info", gpu)
        assert "device: cuda: numba CUDA simulator" in info.output, info.output
    assert "device: cpu" in run("info", tmp_path / "cpuFalse.h5").output


PS_SPEC = (
    SPEC.replace('"bert-large-seq384"]', '"multi-interests"]')
    + """
[options]
ps_local_reduce = true
ps_latency = true
ps_update = true
ps_sparse = true
ps_memory = true
inter_volume = "ring"
"""
)


@pytest.mark.cuda_sim
def test_sweep_on_cuda_with_the_ps_options_writes_the_cpu_cube(tmp_path):
    # the options vector and a sparse embedding workload through the command, on the default model
    spec = tmp_path / "spec.toml"
    spec.write_text(PS_SPEC.format(device=""))
    assert "multi-interests" in PS_SPEC and "[options]" in PS_SPEC
    cpu, gpu = tmp_path / "cpu.h5", tmp_path / "gpu.h5"
    assert run("sweep", spec, "--out", cpu, "-q").exit_code == 0
    done = simulated("sweep", spec, "--out", gpu, "-q", "--device", "cuda")
    assert done.returncode == 0, done.stderr
    assert_same_cube(cpu, gpu)
    with h5py.File(gpu, "r") as f:
        assert f.attrs["model"] == "pai-v2"


def test_no_gpu_is_one_sentence_and_writes_nothing(tmp_path):
    # no device visible (CUDA_VISIBLE_DEVICES empty): the same on a machine with a GPU as without
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(device=""))
    out = tmp_path / "cube.h5"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    done = subprocess.run(
        [*PAIGRID, "sweep", str(spec), "--out", str(out), "--device", "cuda"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2, done.stderr  # bad input: exit 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paigrid: error: --device cuda needs an NVIDIA GPU"), lines
    assert "Traceback" not in done.stderr
    assert not out.exists() and not partial_path(out).exists()


def test_device_names_are_checked(tmp_path):
    with pytest.raises(PaigridError, match="device must be one of cpu, cuda, not 'tpu'"):
        spec_from_dict({"device": "tpu"}, "spec.toml")
    assert_clean_error(run("sweep", "--out", tmp_path / "c.h5", "--device", "gpu"), "--device must be one of")
    assert_clean_error(
        run("sweep", "--out", tmp_path / "c.h5", "--device", "cuda", "--workers", "2"),
        "cannot be combined with --scheduler or --workers",
    )


def test_info_of_a_cube_without_the_device_attribute(tmp_path):
    # cubes written before paigrid recorded the device stay readable
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(device=""))
    out = tmp_path / "cube.h5"
    assert run("sweep", spec, "--out", out, "-q", "--reduce-only").exit_code == 0
    with h5py.File(out, "r+") as f:
        del f.attrs["device"]
    info = run("info", out)
    assert info.exit_code == 0 and "device: not recorded" in info.output, info.output


PTX = """
import types
import numba
import numba.cuda.dispatcher as dispatcher
from paigrid.evaluate import allocate
from paigrid.inputs.spec import spec_from_dict
from paigrid.kernels import cuda as gpu_kernels
from paigrid.schema import BEST_VARIABLES, CUBE_VARIABLES, JOB_GPU_VARIABLES
from paigrid.orchestration import prepare

ns = gpu_kernels.load()
# device functions are compiled for the current device's architecture: name one (sm_90), none is here
dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
grid = prepare(spec_from_dict({"workloads": ["resnet50"], "model": "pai-v2"}, "t"))[0]
jobs, n_gpu = grid.job_rows(0, 1)
out = allocate(grid, 1, True)
terms = (jobs, grid.gpu_table, grid.peak, grid.class_peak, grid.prec_table, grid.options,
         *(out[n] for n in JOB_GPU_VARIABLES))
block = (jobs, n_gpu, grid.arch_codes, grid.gpu_table, grid.peak, grid.prec_table, grid.intra_table,
         grid.intra_fits, grid.network_table, grid.options, True, *(out[n] for n in CUBE_VARIABLES),
         *(out[n] for n in JOB_GPU_VARIABLES), *(out[n] for n in BEST_VARIABLES))
for kernel, args in ((ns.terms_kernel, terms), (ns.configurations_kernel, block)):
    ptx, _ = ns.cuda.compile_ptx(kernel.py_func, tuple(numba.typeof(a) for a in args), cc=(9, 0))
    assert ".entry" in ptx
    print("ptx", kernel.py_func.__name__, len(ptx), "fused multiply-adds", ptx.count("fma.rn"))
"""


@pytest.mark.cuda_sim
def test_cuda_kernels_compile_to_ptx():
    # the simulator runs Python; this compiles the real kernels (helpers included) with NVVM for sm_90
    stdout = compile_ptx(PTX)
    assert "ptx _terms_kernel" in stdout and "ptx _configurations_kernel" in stdout, stdout
    # NVVM contracts a * b + c into one rounding unless told not to (-fma=0), where the CPU rounds
    # twice: the terms kernel (no math library calls) has no fma.rn; the configurations kernel's
    # come from libdevice's log2 (ceil(log2 n) of the collectives), fma-based by design
    terms = next(line for line in stdout.splitlines() if line.startswith("ptx _terms_kernel"))
    assert terms.endswith(" fused multiply-adds 0"), terms


@pytest.mark.cuda_sim
def test_a_sweep_started_on_the_cpu_resumes_on_cuda(tmp_path):
    from paigrid.inputs.spec import load_spec
    from paigrid.orchestration import run_sweep

    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(device=""))
    reference, out = tmp_path / "reference.h5", tmp_path / "cube.h5"
    run_sweep(load_spec(spec), reference, progress=False)

    def stop(written):
        raise KeyboardInterrupt

    with pytest.raises(PaigridError, match="--resume"):
        run_sweep(load_spec(spec), out, progress=False, on_block=stop)
    done = simulated("sweep", spec, "--out", out, "-q", "--resume", "--device", "cuda")
    assert done.returncode == 0, done.stderr
    assert_same_cube(reference, out)
    assert "device: cpu; resumed on cuda: numba CUDA simulator" in run("info", out).output
