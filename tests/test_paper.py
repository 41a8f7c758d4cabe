"""The PAI study as the paper reports it (``study/paper.py``): its numbers against predictions made
by hand, the weightings, the one-change-at-a-time projections, the bracket, the sensitivity and the
fusion factor."""

import numpy as np
import pytest

from paigrid.errors import PaigridError
from paigrid.inputs.spec import Options
from paigrid.predict import predict_configs
from paigrid.study import paper as P
from paigrid.study.population import synthetic_population
from paigrid.study.trace import write_population


@pytest.fixture(scope="module")
def pop_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("paper")
    write_population(synthetic_population(80, 7), folder / "pop.csv")
    return str(folder / "pop.csv")


@pytest.fixture(scope="module")
def numbers(pop_path):
    return P.compute_paper(pop_path, variants=("base", "nic", "comm-v2"))


@pytest.fixture(scope="module")
def pop(pop_path):
    return P.Population(pop_path)


def test_ps_share_per_job_and_by_gpu_by_hand(numbers, pop):
    ps = [i for i, a in enumerate(pop.arch) if a == "ps-worker"]
    results = predict_configs(
        [pop.jobs[i] for i in ps], [pop.jobs[i].current for i in ps], pop.cats, pop.eff, Options(model="pai-v1")
    )
    share = np.array([r["t_comm"] / (r["t_data"] + r["t_flop"] + r["t_mem"] + r["t_comm"]) for r in results])
    gpus = pop.n_gpu[ps]
    per_job, by_gpu = numbers["figures"]["base"]["ps_comm_share"]
    assert per_job == pytest.approx(share.mean(), rel=1e-12)
    assert by_gpu == pytest.approx((share * gpus).sum() / gpus.sum(), rel=1e-12)
    assert per_job != pytest.approx(by_gpu)  # the two weightings differ on this population
    over = numbers["figures"]["base"]["ps_comm_over_80"][0]
    assert over == pytest.approx(np.mean(share > 0.8), rel=1e-12)


def test_bracket_is_the_shared_and_per_worker_variants(numbers):
    shared, own = numbers["bracket"]["ps_comm_share"]
    assert shared == numbers["figures"]["base"]["ps_comm_share"] and own == numbers["figures"]["nic"]["ps_comm_share"]
    assert own[0] < shared[0]  # a NIC share per worker: less communication
    eth_shared, eth_own = numbers["bracket"]["eth_speedup"]
    assert 1.0 < eth_own[0] < eth_shared[0]


def test_projections_change_one_thing_at_a_time(numbers, pop):
    """The hardware swap keeps PS/Worker and moves the job to its NVLink sibling; by hand for one job."""
    proj = numbers["figures"]["base"]["projections"]
    i = next(
        i
        for i, (a, intra, g) in enumerate(zip(pop.arch, pop.intra, pop.gpu))
        if a == "ps-worker" and intra == "pcie3" and g == "V100-PCIe-16GB"
    )
    job = pop.jobs[i]
    (base,) = predict_configs([job], [job.current], pop.cats, pop.eff, Options(model="pai-v1"))
    (swapped,) = predict_configs(
        [job],
        [{**job.current, "gpu": "V100-SXM2-16GB", "intra": "nvlink2-hcm"}],
        pop.cats,
        pop.eff,
        Options(model="pai-v1"),
    )
    assert swapped["arch"] == "ps-worker" and swapped["t_comm"] == base["t_comm"]  # v1 PS ignores the intra link
    assert swapped["step_time"] < base["step_time"]  # the SXM part is faster
    assert proj["hardware"]["faster"][0] == 1.0
    # the v1 model cannot make a PS/Worker job slower on all-reduce (the 100%); v2 can
    assert proj["both"]["faster"][0] == 1.0
    assert numbers["figures"]["comm-v2"]["projections"]["both"]["faster"][0] < 1.0
    for key in ("same_pcie_local", "same_pcie_cluster", "both_local", "both_cluster"):
        assert proj[key]["jobs"] <= proj[key]["in_scope"]
    assert proj["both"]["jobs"] == proj["both_local"]["jobs"] + proj["both_cluster"]["jobs"]
    # counting the targets that do not fit as not faster can only lower the share
    assert proj["both"]["faster_all"][0] <= proj["both"]["faster"][0]


def test_sensitivity_and_fusion_directions(numbers):
    for name, table in numbers["sensitivity"].items():
        for resource, archs in table.items():
            for arch, (per_job, by_gpu) in archs.items():
                assert per_job >= 1.0 - 1e-9 and by_gpu >= 1.0 - 1e-9, (name, resource, arch)
        assert table["network"]["1w1g"] == (1.0, 1.0)  # a single GPU uses no network
        assert table["network"]["ps-worker"][0] > table["hbm"]["ps-worker"][0]
    for row in numbers["memory"]["base"]["archs"].values():
        assert row["fusion"][0] >= 1.0 and 0.0 <= row["mem_share"][0] <= 1.0


def test_render_has_both_weightings_and_the_paper(numbers):
    text = P.render_paper(numbers)
    for needle in (
        "~62%",
        ">40%",
        "5%",
        "~3%",
        "per job / by GPU",
        "placement bracket",
        "2x NVLink",
        "fusion speedup",
        "hardware swap only",
    ):
        assert needle in text, needle


def test_scaling_an_unknown_resource_is_one_sentence(pop):
    job = pop.jobs[0]
    with pytest.raises(PaigridError, match="cannot scale disk"):
        predict_configs([job], [job.current], pop.cats, pop.eff, Options(model="pai-v1"), scale={"disk": 2.0})
