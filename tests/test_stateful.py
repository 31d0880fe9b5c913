"""Sticky error codes and error counters become events; repeats fold; stored state carries across runs."""

from __future__ import annotations

import polars as pl

from normalizers import Context, ExpositionParser, Normalizer, Options
from tests.test_normalize import FIXTURES, PROFILES, T0, normalize

XID = 'DCGM_FI_DEV_XID_ERRORS{{gpu="0",Hostname="n1",err_code="{v}"}} {v} {ts}\n'


def scrapes(template: str, values: list[int]) -> str:
    return "".join(template.format(v=v, ts=T0 - (len(values) - i) * 15_000) for i, v in enumerate(values))


def events(text: str, **kw: object) -> pl.DataFrame:
    out, _ = normalize(text, **kw)  # type: ignore[arg-type]
    return out.samples.filter(pl.col("metric") == "accelerator.errors").sort("ts")


def test_five_scrapes_of_one_xid_are_one_event() -> None:
    out, reads = normalize(scrapes(XID, [48] * 5))
    assert reads == 5 and out.folded == 4
    assert out.samples.select("value", "attributes").rows() == [
        (1.0, '{"code":"48","error_class":"memory_uncorrectable","severity":"fatal"}')]
    assert out.state.select("source", "value").rows() == [("DCGM_FI_DEV_XID_ERRORS{}", 48.0)]


def test_a_cleared_code_that_comes_back_is_a_new_event() -> None:
    got = events(scrapes(XID, [0, 48, 48, 0, 48, 79, 13]))
    assert [a.split('"code":"')[1].split('"')[0] for a in got["attributes"]] == ["48", "48", "79", "13"]
    assert got["attributes"][-1] == '{"code":"13","error_class":"application","severity":"recoverable"}'
    assert got["value"].sum() == 4  # a plain sum over a window counts events


def test_error_counter_increases_and_resets() -> None:
    tmpl = 'DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{gpu="0",Hostname="n1"}} {v} {ts}\n'
    got = events(scrapes(tmpl, [0, 2, 2, 5, 1, 4]))
    assert got["value"].to_list() == [2.0, 3.0, 1.0, 3.0]  # 0->2, 2->5, restart at 1, 1->4
    assert set(got["attributes"]) == {'{"code":"pcie_replay","error_class":"interconnect","severity":"informational"}'}


def test_prior_state_from_the_store_suppresses_a_repeat() -> None:
    asked: list[tuple[str, str, str, int]] = []

    def prior(keys: pl.DataFrame) -> pl.DataFrame:
        asked.extend(keys.rows())
        return keys.select("node", "device", "source", pl.lit(48.0).alias("value"))

    parser = ExpositionParser()
    n = Normalizer(Context(PROFILES, pool="p"), Options(default_ts_ms=T0, now_ms=T0))
    out = n.normalize(parser.feed(scrapes(XID, [48, 48, 95]).encode()), prior)
    assert asked == [("n1", "0", "DCGM_FI_DEV_XID_ERRORS{}", T0 - 45_000)]
    assert out.samples["attributes"].to_list() == ['{"code":"95","error_class":"memory_uncorrectable",'
                                                   '"severity":"fatal"}']
    assert out.folded == 2


def test_a_later_batch_uses_the_earlier_batch_not_the_store() -> None:
    calls = []

    def prior(keys: pl.DataFrame) -> pl.DataFrame:
        calls.append(keys.height)
        return keys.select("node", "device", "source", pl.lit(None, pl.Float64).alias("value")).head(0)

    n = Normalizer(Context(PROFILES, pool="p"), Options(default_ts_ms=T0, now_ms=T0))
    parser = ExpositionParser()
    text = scrapes(XID, [48, 48, 48, 48]).encode()
    first = n.normalize(parser.feed(text[: len(text) // 2 + 1]), prior)
    second = n.normalize(parser.feed(text[len(text) // 2 + 1:]), prior)
    assert calls == [1]
    assert first.samples.height + second.samples.height == 1


def test_cambricon_xid_counter_and_amd_afid_classes() -> None:
    out, _ = normalize((FIXTURES / "cambricon.prom").read_text())
    got = out.samples.filter(pl.col("metric") == "accelerator.errors")
    assert got.select("value", "attributes").rows() == [
        (2.0, '{"code":"0x1c","error_class":"unknown","severity":"recoverable"}')]
    afid = ('gpu_afid_errors{{afid_index="0",gpu_id="0",hostname="mi300x-a-001",severity="{s}"}} {v} {ts}\n')
    text = (afid.format(s="fatal", v=30, ts=T0) + afid.format(s="non_fatal_corrected", v=30, ts=T0))
    assert sorted(events(text)["attributes"].to_list()) == [
        '{"code":"30","error_class":"memory_correctable","severity":"informational"}',
        '{"code":"30","error_class":"memory_uncorrectable","severity":"fatal"}']


DBE = 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{gpu="0",Hostname="n1"}} {v} {ts}\n'
REPLAY = 'DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{gpu="0",Hostname="n1"}} {v} {ts}\n'


def test_one_incident_is_one_event_with_every_code() -> None:
    # second scrape: XID 48 appears and the double-bit ECC counter rises by 1, both fatal; PCIe replays rise by
    # 3 in the same scrape, an informational event of its own; the third scrape changes nothing
    text = scrapes(XID, [0, 48, 48]) + scrapes(DBE, [0, 1, 1]) + scrapes(REPLAY, [0, 3, 3])
    out, reads = normalize(text)
    got = events(text).sort("attributes")
    assert got.select("ts", "value", "attributes").rows() == [
        (T0 - 30_000, 1.0, '{"code":"48+ecc_dbe_volatile","error_class":"memory_uncorrectable","severity":"fatal"}'),
        (T0 - 30_000, 3.0, '{"code":"pcie_replay","error_class":"interconnect","severity":"informational"}'),
    ]
    # nothing lost: the fatal row stands for two reads, the others fold
    assert reads == 9 and int(got["n_src"].sum()) == 3 and out.folded == 6


def test_events_of_other_classes_at_the_same_instant_stay_apart() -> None:
    tmpl = 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{gpu="0",Hostname="n1"}} {v} {ts}\n'  # memory_correctable/informational
    got = events(scrapes(REPLAY, [0, 3]) + scrapes(tmpl, [0, 2])).sort("attributes")
    assert got["attributes"].to_list() == [
        '{"code":"ecc_sbe_volatile","error_class":"memory_correctable","severity":"informational"}',
        '{"code":"pcie_replay","error_class":"interconnect","severity":"informational"}']


def test_events_apart_in_time_or_on_other_devices_stay_apart() -> None:
    other = 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{gpu="1",Hostname="n1"}} {v} {ts}\n'
    text = scrapes(XID, [0, 48, 48]) + scrapes(DBE, [0, 0, 1]) + scrapes(other, [0, 1, 1])
    got = events(text).sort("ts", "attributes")
    codes = [(ts, a.split('"code":"')[1].split('"')[0]) for ts, a in got.select("ts", "attributes").rows()]
    assert sorted(codes) == [(T0 - 30_000, "48"), (T0 - 30_000, "ecc_dbe_volatile"), (T0 - 15_000, "ecc_dbe_volatile")]
