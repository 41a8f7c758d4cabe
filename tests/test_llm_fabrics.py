"""The scale-out fabric of the LLM kernel (``datasets/llm_fabrics.csv``): agreement with the
numpy reference (NaN positions included), each mechanism against its formula, and each
mechanism's direction (more oversubscription, tiers or hop latency is never faster; SHARP,
NVLS and larger rail groups are never slower)."""

import dataclasses
import math

import numpy as np
import pytest

from cli_helpers import assert_clean_error, run
from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.kernels import llm_columns as K
from paigrid.kernels.llm import evaluate_llm
from paigrid.kernels.llm_reference import evaluate_llm_reference
from paigrid.llm.evaluate import predict, tables
from paigrid.llm.fabrics import fabric, load_fabrics
from paigrid.llm.models import model
from paigrid.llm.parallelism import Layout, enumerate_layouts
from paigrid.llm.tables import Hardware, LlmOptions

CATS = Catalogues.load()
EFF = defaults()
OPTIONS = LlmOptions.defaults()
FABRICS = load_fabrics().names
H100 = Hardware("H100-SXM5-80GB", "amp-bf16", 8, "nvswitch-nvlink4", "ib-ndr-400g", 1.0)
B200 = Hardware("B200", "amp-bf16", 72, "nvlink5", "ib-ndr-400g", 1.0)


def _layouts(name="llama3-70b"):
    m = model(name)
    out = []
    for n in (64, 512, 4096):
        found = enumerate_layouts(m, n)
        out += found[:: max(1, len(found) // 150)]
    # plain all-reduces (ZeRO 0) and tensor all-reduces without sequence parallelism
    out += [Layout(tp=8, pp=8, dp=64, zero=0, recompute="full", sp=sp) for sp in (False, True)]
    out += [Layout(tp=4, pp=16, dp=64, zero=0, recompute="full", sp=False, micro_batch=2)]
    return m, out


def _run(m, layouts, designs, options=OPTIONS, edit=None):
    arrays = list(tables(m, layouts, designs, CATS, EFF, options))
    if edit:
        arrays[1] = arrays[1].copy()
        edit(arrays[1])
    out = np.empty((len(layouts) * len(designs), K.N_RESULT_FIELDS))
    evaluate_llm(*arrays, out)
    return out, arrays


@pytest.mark.parametrize("name", ["llama3-70b", "mixtral-8x7b"])
def test_kernel_agrees_with_the_reference_on_every_fabric(name):
    m, layouts = _layouts(name)
    if m.moe:
        layouts += [
            Layout(tp=2, pp=4, dp=64, ep=8, zero=1, recompute="full"),
            Layout(tp=8, pp=2, dp=32, ep=8, cp=2, zero=0, recompute="full", sp=False),
        ]
    designs = [dataclasses.replace(hw, network=f) for f in FABRICS for hw in (H100, B200)]
    designs += [H100, dataclasses.replace(H100, network="tor-roce-3to1", domain=4)]
    for options in (OPTIONS, dataclasses.replace(OPTIONS, in_network_reduction=False)):
        out, arrays = _run(m, layouts, designs, options)
        ref = evaluate_llm_reference(*arrays)
        assert np.array_equal(np.isnan(out), np.isnan(ref))
        np.testing.assert_allclose(out, ref, rtol=1e-12, equal_nan=True)
    assert K.REASON_VALID in set(out[:, K.R_REASON].astype(int))
    # a fabric of two tiers stops at its pods: the job beyond them is invalid, the same in both
    out, arrays = _run(m, layouts, designs, edit=lambda hw: hw.__setitem__((slice(None), K.HW_TIERS), 2))
    ref = evaluate_llm_reference(*arrays)
    np.testing.assert_allclose(out, ref, rtol=1e-12, equal_nan=True)
    assert K.REASON_FABRIC in set(out[:, K.R_REASON].astype(int))


def _steps(m, layouts, designs, edit=None, options=OPTIONS):
    out, _ = _run(m, layouts, designs, options, edit)
    return out[:, K.R_STEP], out[:, K.R_REASON]


def _column(field, value):
    def edit(hw):
        hw[:, field] = value

    return edit


def _never_faster(slow, fast):
    """Same valid set; every valid step of ``slow`` >= that of ``fast``."""
    assert np.array_equal(np.isnan(slow), np.isnan(fast))
    ok = ~np.isnan(fast)
    assert ok.any()
    assert np.all(slow[ok] >= fast[ok] * (1 - 1e-12))
    return slow[ok], fast[ok]


DIRECTION_DESIGNS = [
    dataclasses.replace(H100, network="tor-roce-3to1"),
    dataclasses.replace(B200, network="meta-roce-24k"),
    dataclasses.replace(H100, network="dgx-h100-superpod"),
]


def test_more_oversubscription_is_never_faster():
    m, layouts = _layouts()
    base, _ = _steps(m, layouts, DIRECTION_DESIGNS, _column(K.HW_OVERSUB1, 1.0))
    prev = base
    for ratio in (2.0, 4.0, 8.0):
        step, _ = _steps(m, layouts, DIRECTION_DESIGNS, _column(K.HW_OVERSUB1, ratio))
        _never_faster(step, prev)
        prev = step
    slow, fast = _never_faster(prev, base)
    assert np.any(slow > fast)  # and it matters for some layouts
    prev, _ = _steps(m, layouts, DIRECTION_DESIGNS, _column(K.HW_OVERSUB2, 1.0))
    for ratio in (3.0, 7.0):
        step, _ = _steps(m, layouts, DIRECTION_DESIGNS, _column(K.HW_OVERSUB2, ratio))
        _never_faster(step, prev)
        prev = step


def test_more_hop_latency_and_smaller_switch_groups_are_never_faster():
    m, layouts = _layouts()
    fast, _ = _steps(m, layouts, DIRECTION_DESIGNS, _column(K.HW_HOP_LAT, 0.0))
    slow, _ = _steps(m, layouts, DIRECTION_DESIGNS, _column(K.HW_HOP_LAT, 5e-6))
    a, b = _never_faster(slow, fast)
    assert np.any(a > b)
    # a rail group of 32 servers against a top-of-rack switch of 2 (same oversubscription)
    oversub = _column(K.HW_OVERSUB1, 4.0)
    rail, _ = _steps(
        m, layouts, DIRECTION_DESIGNS, lambda hw: (oversub(hw), hw.__setitem__((slice(None), K.HW_TIER1), 32))
    )
    tor, _ = _steps(
        m, layouts, DIRECTION_DESIGNS, lambda hw: (oversub(hw), hw.__setitem__((slice(None), K.HW_TIER1), 2))
    )
    a, b = _never_faster(tor, rail)
    assert np.any(a > b)


def test_in_network_reduction_is_never_slower():
    m, layouts = _layouts()
    designs = [
        dataclasses.replace(H100, network="dgx-h100-superpod"),
        dataclasses.replace(B200, network="gb200-nvl72-superpod"),
    ]
    on, _ = _steps(m, layouts, designs)
    off, _ = _steps(m, layouts, designs, options=dataclasses.replace(OPTIONS, in_network_reduction=False))
    a, b = _never_faster(off, on)
    assert np.any(a > b)
    for field in (K.HW_SHARP, K.HW_NVLS):
        without, _ = _steps(m, layouts, designs, _column(field, 0.0))
        _never_faster(without, on)


def _one(m, lay, hw, options=OPTIONS):
    r = predict(m, lay, hw, CATS, EFF, options)
    assert r["valid"], r["reason"]
    return r


def _dp(m, lay, hw, options=OPTIONS, edit=None):
    out, arrays = _run(m, [lay], [hw], options, edit)
    assert out[0, K.R_REASON] == K.REASON_VALID
    vec, row = arrays[2], arrays[1][0]
    nbytes = (m.layers * vec[K.M_SHARED_PARAMS] + vec[K.M_EMBED_PARAMS]) / lay.tp * 2  # 16-bit, 1/t of it
    return out[0, K.R_DP], nbytes, row, out[0]


def test_sharp_halves_the_cross_domain_all_reduce():
    """Without ZeRO the gradients are all-reduced: the ring sends 2 (G-1)/G of the message per
    GPU across the G domains, SHARP (the switches reduce and multicast) sends it once."""
    m = model("llama3-8b")
    lay = Layout(tp=8, pp=1, dp=64, zero=0, recompute="full", sp=True)
    hw = dataclasses.replace(H100, network="dgx-h100-superpod")
    no_nvls = _column(K.HW_NVLS, 0.0)
    on, nbytes, row, _ = _dp(m, lay, hw, edit=no_nvls)
    off, _, _, _ = _dp(m, lay, hw, dataclasses.replace(OPTIONS, in_network_reduction=False), no_nvls)
    net = fabric("dgx-h100-superpod", CATS, EFF)
    bw = net.nic_GB_per_s * 1e9 * net.efficiency
    g = 64  # domains: beyond one rail group of 32 servers, one tier up (1:1, two more hops)
    lat = (net.latency_us + 2 * net.hop_latency_us) * 1e-6
    ring = 2 * (g - 1) / g * nbytes / bw + 2 * (g - 1) * lat
    sharp = nbytes / bw + 2 * lat
    assert off - on == pytest.approx(ring - sharp, rel=1e-9)
    assert sharp / ring == pytest.approx(0.5, abs=0.02)
    # NVLS does the same inside the domain, to the tensor-parallel all-reduces (4 per layer and
    # micro-batch, 6 with full recomputation) when they are not reduce-scatter + all-gather pairs
    ibw, ilat = row[K.HW_INTRA_BW], row[K.HW_INTRA_LAT]
    no_sp = dataclasses.replace(lay, sp=False)
    with_nvls, without = _dp(m, no_sp, hw)[3], _dp(m, no_sp, hw, edit=no_nvls)[3]
    act = m.seq_len * m.hidden * 2
    saved = 2 * 7 / 8 * act / ibw + 14 * ilat - (act / ibw + 2 * ilat)
    assert without[K.R_TP] - with_nvls[K.R_TP] == pytest.approx(
        with_nvls[K.R_MICROBATCHES] * m.layers * 6 * saved, rel=1e-9
    )
    assert _dp(m, lay, hw)[3][K.R_TP] == _dp(m, lay, hw, edit=no_nvls)[3][K.R_TP]
    # the distributed optimizer's reduce-scatter + all-gather is not shortened (each GPU still
    # sends its whole gradient into the switch): ZeRO-1 gains nothing
    z1 = dataclasses.replace(lay, zero=1)
    assert _dp(m, z1, hw)[0] == _dp(m, z1, hw, dataclasses.replace(OPTIONS, in_network_reduction=False))[0]


def test_oversubscription_divides_the_cross_group_bandwidth():
    """A data-parallel group within one top-of-rack switch (tier 1) runs at the NICs'
    bandwidth; one spanning racks shares the 3:1 uplinks (bandwidth / 3, two more hops), one
    spanning pods both tiers' (/ 9, four more hops)."""
    m = model("llama3-8b")
    hw = dataclasses.replace(H100, network="tor-roce-3to1")
    net = fabric("tor-roce-3to1", CATS, EFF)
    bw, lat, hop = net.nic_GB_per_s * 1e9 * net.efficiency, net.latency_us * 1e-6, net.hop_latency_us * 1e-6
    for g, divisor, extra in ((4, 1, 0), (16, 3, 2 * hop), (256, 9, 4 * hop)):
        lay = Layout(tp=8, pp=1, dp=g, zero=1, recompute="full")
        dp = _dp(m, lay, hw)[0]
        _, nbytes, _, _ = _dp(m, lay, hw)
        # t = 8 fills the domain: one member per domain, the ring runs across the g domains
        expected = 2 * (g - 1) / g * nbytes / (bw / divisor) + 2 * (g - 1) * (lat + extra)
        assert dp == pytest.approx(expected, rel=1e-9), g


def test_the_fabric_catalogue_and_its_errors(tmp_path):
    cat = load_fabrics()
    assert {"dgx-h100-superpod", "gb200-nvl72-superpod", "meta-roce-24k"} <= set(cat.names)
    for name in cat.names:
        f = fabric(name, CATS)
        row = cat.row(name)
        assert row["source"].strip()
        assert not f.sharp or f.kind == "infiniband"  # SHARP is an InfiniBand switch feature
        assert f.oversubscription_tier1 >= 1 and f.tier2_GPUs >= f.tier1_GPUs
    plain = fabric("ib-ndr-400g", CATS)
    assert plain.topology == "ideal" and math.isinf(plain.capacity()) and not plain.sharp
    with pytest.raises(PaigridError, match="neither a fabric"):
        fabric("warp-drive", CATS)
    bad = tmp_path / "fabrics.csv"
    text = (load_fabrics.__globals__["resources"].files("paigrid.datasets") / "llm_fabrics.csv").read_text()
    bad.write_text(text.replace(",rail,", ",mesh,", 1))
    with pytest.raises(PaigridError, match="topology must be rail or tor"):
        load_fabrics(bad)
    bad.write_text(text.replace(",3,256,2048,1,1,", ",3,256,2048,0.5,1,", 1))
    with pytest.raises(PaigridError, match="oversubscription_tier1_ratio"):
        load_fabrics(bad)


def test_predict_and_sweep_take_fabrics(tmp_path):
    ok = run(
        "llm",
        "predict",
        "--model",
        "llama3-70b",
        "--gpu",
        "H100",
        "--n-gpu",
        "1024",
        "--tp",
        "8",
        "--pp",
        "4",
        "--recompute",
        "full",
        "--network",
        "meta-roce-24k",
        "--json",
    )
    assert ok.exit_code == 0, ok.output
    assert_clean_error(
        run("llm", "predict", "--model", "llama3-70b", "--gpu", "H100", "--n-gpu", "64", "--network", "warp-drive"),
        "neither a fabric",
    )
    out = tmp_path / "f.h5"
    result = run(
        "llm",
        "sweep",
        "-o",
        out,
        "--models",
        "llama3-8b",
        "--n-gpu",
        "64",
        "--gpu",
        "H100",
        "--domain",
        "8",
        "--network",
        "dgx-h100-superpod,tor-roce-3to1",
        "-q",
    )
    assert result.exit_code == 0, result.output


def test_pipeline_and_expert_traffic_take_the_fabric_path():
    """The pipeline sends cross the fabric path of the whole job (the pipeline is the outermost
    rank order) and the expert all-to-alls that of the t x e GPUs (the shares of the ranks in
    other domains): beyond a tier-1 group at bandwidth / the tier-1 oversubscription with two
    more switch hops."""
    hw = dataclasses.replace(H100, network="tor-roce-3to1")
    net = fabric("tor-roce-3to1", CATS, EFF)
    bw, lat = net.nic_GB_per_s * 1e9 * net.efficiency, net.latency_us * 1e-6
    far_bw, far_lat = bw / 3, lat + 2 * net.hop_latency_us * 1e-6
    m = model("llama3-70b")
    lay = Layout(tp=8, pp=4, dp=2, zero=1, recompute="full")  # 64 GPUs: 8 domains, 2 racks of 4
    out, _ = _run(m, [lay], [hw])
    r = out[0]
    assert r[K.R_REASON] == K.REASON_VALID
    expected = 2 * r[K.R_MICROBATCHES] * (m.seq_len * m.hidden * 2 / 8 / far_bw + far_lat)
    assert r[K.R_PP] == pytest.approx(expected, rel=1e-12)
    moe = model("mixtral-8x7b")
    lay = Layout(tp=2, pp=1, dp=64, ep=8, zero=1, recompute="full")  # t x e = 16 GPUs: 2 domains
    one_rack = _column(K.HW_TIER1, 2.0)
    near, arrays = _run(moe, [lay], [hw], edit=one_rack)
    far, _ = _run(moe, [lay], [hw], edit=_column(K.HW_TIER1, 1.0))
    vec, intra = arrays[2], arrays[1][0, K.HW_INTRA_BW]
    # 4 of the 8 expert ranks in each domain: 3/8 of a GPU's routed bytes go on NVLink, 4/8
    # (the other domain's ranks) over the fabric, at the same time
    routed = moe.seq_len * vec[K.M_TOPK] * moe.hidden * 2 / 2
    count = near[0, K.R_MICROBATCHES] * moe.layers * vec[K.M_MOE_FRACTION] * 6
    assert routed * 4 / 8 / bw > routed * 3 / 8 / intra
    assert near[0, K.R_EP] == pytest.approx(count * (routed * 4 / 8 / bw + 7 * lat), rel=1e-12)
    assert far[0, K.R_EP] == pytest.approx(count * (routed * 4 / 8 / far_bw + 7 * far_lat), rel=1e-12)


def test_query_per_network_and_the_fabric_reason(tmp_path):
    """--per network: the best design of each network per GPU count; a job larger than a
    two-tier fabric has no valid layout, and the row says the reason is the fabric."""
    import json

    out = tmp_path / "n.h5"
    result = run(
        "llm",
        "sweep",
        "-o",
        out,
        "--models",
        "llama3-8b",
        "--n-gpu",
        "64,16384",
        "--gpu",
        "H100,B200",
        "--domain",
        "8",
        "--network",
        "fabrics,ib-ndr-400g",
        "-q",
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(run("llm", "query", out, "--model", "llama3-8b", "--per", "network", "--json").output)
    networks = [*FABRICS, "ib-ndr-400g"]
    assert [(r["n_gpu"], r["network"]) for r in rows] == [(n, w) for n in (64, 16384) for w in networks]
    every = json.loads(run("llm", "query", out, "--model", "llama3-8b", "--per", "design", "--json").output)
    for r in rows:
        if r["n_gpu"] == 16384 and r["network"] == "rail-roce-400g":  # two tiers: 8,192 GPUs at most
            assert r["layout"] == "no valid layout (most often: fabric)"
            continue
        same = [e["step_time"] for e in every if (e["n_gpu"], e["network"]) == (r["n_gpu"], r["network"])]
        assert r["step_time"] == min(same) and len(same) == 2
    assert_clean_error(run("llm", "query", out, "--model", "llama3-8b", "--per", "rack"), "--per must be one of")


def test_a_job_beyond_the_fabric_says_why():
    m = model("llama3-70b")
    hw = dataclasses.replace(H100, network="rail-roce-400g")  # two tiers: 8,192 GPUs
    r = predict(m, Layout(tp=8, pp=16, dp=128, recompute="full"), hw, CATS, EFF, OPTIONS)
    assert r["reason_code"] == K.REASON_FABRIC and not r["valid"] and np.isnan(r["step_time"])
    assert r["reason"] == "the job's 2048 NVLink domains exceed what the fabric's tiers connect."
    assert predict(m, Layout(tp=8, pp=16, dp=64, recompute="full"), hw, CATS, EFF, OPTIONS)["valid"]
    text = run(
        "llm",
        "predict",
        "--model",
        "llama3-70b",
        "--gpu",
        "H100",
        "--n-gpu",
        "16384",
        "--tp",
        "8",
        "--pp",
        "16",
        "--recompute",
        "full",
        "--network",
        "rail-roce-400g",
    )
    assert_clean_error(text, "invalid layout", "exceed what the fabric's tiers connect")
