"""Hardware profile loading: every shipped profile, datasheet numbers, units, and one-line errors."""

import pytest

from kvsim.errors import KvsimError
from kvsim.specs.hardware import (
    HardwareSpec,
    hardware_profiles_dir,
    list_hardware,
    load_hardware,
    parse_quantity,
    scan_hardware,
)

NUMERIC = ("memory_bytes", "memory_gb", "hbm_bandwidth", "peak_flops", "host_link_bandwidth",
           "host_dram_bytes", "ssd_bytes", "ssd_bandwidth", "interconnect_bandwidth")
MINIMAL = {"memory_gb": 80, "hbm_bandwidth": "2 TB/s", "peak_flops": {"bf16": 1e15},
           "host_link_bandwidth": 32e9, "host_dram_bytes": "256 GiB", "ssd_bytes": "4 TB",
           "ssd_bandwidth": "7 GB/s", "interconnect_bandwidth": "300 GB/s"}


def test_shipped_profiles():
    assert list_hardware() == ["a100-40gb", "a100-80gb", "b200", "cpu", "gb200", "h100-sxm", "h200", "l40s",
                              "mi300x", "rtx-pro-6000"]
    assert (hardware_profiles_dir() / "h200.yaml").is_file()


@pytest.mark.parametrize("name", list_hardware())
def test_every_profile_loads_with_a_source_for_every_number(name):
    hw = load_hardware(name)
    assert hw.name == name
    for field in NUMERIC:
        value = getattr(hw, field)
        assert (min(value.values()) if isinstance(value, dict) else value) > 0, field
        assert hw.sources.get(field), f"{name}: no source for {field}"
    assert "bf16" in hw.peak_flops
    assert hw.memory_bytes < hw.memory_gb * 1e9 * 1.1  # the runtime never sees more than the datasheet


def test_datasheet_numbers():
    h200 = load_hardware("h200")
    assert (h200.memory_gb, h200.hbm_bandwidth) == (141, 4.8e12)
    assert h200.peak_flops["bf16"] == 989.5e12 and h200.peak_flops["fp8"] == 1979e12
    assert h200.memory_bytes == int(139.81 * 2**30)
    assert load_hardware("h100-sxm").hbm_bandwidth == 3.35e12
    assert load_hardware("a100-40gb").hbm_bandwidth == 1555e9
    a100 = load_hardware("a100-80gb")
    assert (a100.hbm_bandwidth, a100.peak_flops["bf16"]) == (2039e9, 312e12)
    l40s = load_hardware("l40s")
    assert (l40s.memory_gb, l40s.hbm_bandwidth, l40s.peak_flops["bf16"]) == (48, 864e9, 362.05e12)
    mi300x = load_hardware("mi300x")
    assert (mi300x.memory_gb, mi300x.hbm_bandwidth, mi300x.peak_flops["bf16"]) == (192, 5.3e12, 1307.4e12)
    assert load_hardware("cpu").memory_bytes == 16 * 2**30


def test_rtx_pro_6000_figures_and_a_source_for_each():
    rtx = load_hardware("rtx-pro-6000")
    assert (rtx.memory_gb, rtx.memory_bytes, rtx.hbm_bandwidth) == (96, 97887 * 2**20, 1792e9)
    flops = rtx.peak_flops
    assert (flops["bf16"], flops["fp8"], flops["int8"]) == (467.8e12, 935.6e12, 935.6e12)
    assert rtx.host_link_bandwidth == rtx.interconnect_bandwidth == 64e9  # PCIe Gen5 x16, no NVLink
    assert rtx.interconnect_bandwidth_by_tp is None and rtx.usd_per_gpu_hour == 1.57
    sourced = {"memory_gb", "memory_bytes", "hbm_bandwidth", "peak_flops", "host_link_bandwidth",
               "interconnect_bandwidth", "network_bandwidth", "host_dram_bytes", "ssd_bytes", "ssd_bandwidth",
               "usd_per_gpu_hour"}
    assert set(rtx.sources) == sourced
    assert all(rtx.sources[k].startswith("assumption") for k in ("network_bandwidth", "host_dram_bytes"))


def test_names_are_case_insensitive_and_unknown_names_suggest():
    assert load_hardware("H200").name == "h200"
    with pytest.raises(KvsimError, match="unknown hardware 'h100'.*did you mean.*h100-sxm") as exc:
        load_hardware("h100")
    assert "\n" not in str(exc.value)


def test_flops_fall_back_to_a_format_the_device_has():
    a100 = load_hardware("a100-80gb")
    assert a100.flops("fp8") == 312e12  # no fp8 tensor cores: bf16 math
    assert a100.flops("fp32") == 19.5e12
    assert load_hardware("cpu").flops("tf32") == 268.8e9  # no tf32: plain fp32
    assert len({a100, load_hardware("a100-80gb")}) == 1  # hashable, equal by value
    assert load_hardware("h200").flops("fp8") == 1979e12
    # FP4 weights: the fp4 rate on Blackwell, W4A16 (bf16 math) where the device has no FP4 tensor cores
    h100, b200 = load_hardware("h100-sxm"), load_hardware("b200")
    assert h100.flops("mxfp4") == h100.flops("nvfp4") == h100.flops("bf16")
    assert b200.flops("nvfp4") == b200.flops("mxfp4") == 9000e12 == b200.peak_flops["fp4"]


@pytest.mark.parametrize("text, value", [
    ("4.8 TB/s", 4.8e12), ("16 GiB", 16 * 2**30), ("4.8e12", 4.8e12), (5, 5.0), ("989.5 TFLOPS", 989.5e12),
    ("1979 TOPS", 1979e12), ("1.5 MiB", 1.5 * 2**20), ("64GB/s", 64e9), ("2.1e+9", 2.1e9),
])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["4.8 TX/s", "fast", "4.8 T", True, "1 Gb"])
def test_parse_quantity_rejects(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_inline_mapping_with_memory_gb():
    hw = load_hardware(dict(MINIMAL, name="mine"))
    assert isinstance(hw, HardwareSpec)
    assert (hw.name, hw.memory_bytes, hw.hbm_bandwidth) == ("mine", 80e9, 2e12)
    assert hw.host_dram_bytes == 256 * 2**30
    assert hw.calibration is None and hw.sources == {}


@pytest.mark.parametrize("change, message", [
    ({"hbm_bandwidth": None}, "missing key 'hbm_bandwidth'"),
    ({"hbm_bandwidth": "lots"}, "hbm_bandwidth: cannot read 'lots'"),
    ({"ssd_bandwidth": 0}, "ssd_bandwidth must be > 0"),
    ({"hbm_bandwith": 1e12}, "unknown key 'hbm_bandwith'"),
    ({"peak_flops": {"bf17": 1e15}}, "peak_flops: unknown dtype 'bf17'"),
    ({"peak_flops": {}}, "peak_flops must map"),
    ({"peak_flops": {"bf16": "x"}}, "peak_flops.bf16: cannot read"),
    ({"memory_gb": None}, "missing key 'memory_bytes'"),
    ({"sources": ["a"]}, "sources must be a mapping"),
])
def test_bad_inline_hardware(change, message):
    data = {**MINIMAL, **change}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(KvsimError, match=message) as exc:
        load_hardware(data)
    assert str(exc.value).startswith("inline hardware:") and "\n" not in str(exc.value)


def test_profile_folder_from_env_and_errors_name_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KVSIM_HARDWARE_DIR", str(tmp_path))
    lines = [f"{k}: {v}" for k, v in MINIMAL.items() if k != "peak_flops"] + ["peak_flops: {bf16: 1.0e+15}"]
    (tmp_path / "Mine.yaml").write_text("\n".join(lines) + "\n")
    (tmp_path / "broken.yaml").write_text("memory_gb: 80\nhbm_bandwidth: 2 TB/s\n")
    (tmp_path / "syntax.yaml").write_text("memory_gb: 80\npeak_flops: {bf16: 1\n")
    assert hardware_profiles_dir() == tmp_path
    assert list_hardware() == ["broken", "mine", "syntax"]
    assert load_hardware("mine").name == "mine"
    with pytest.raises(KvsimError, match=r"broken.yaml: missing key 'peak_flops'"):
        load_hardware("broken")
    with pytest.raises(KvsimError, match=r"syntax.yaml:\d+: expected ','"):
        load_hardware("syntax")
    assert load_hardware(str(tmp_path / "Mine.yaml")).name == "mine"


@pytest.mark.parametrize("text", ["1e999", "inf", "nan", ".inf", float("nan"), float("inf"), 10**400,
                                  "9" * 100, "1.2.3 GB"])
def test_parse_quantity_rejects_non_finite_and_unreadable_numbers(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


@pytest.mark.parametrize("change, message", [
    ({"hbm_bandwidth": "1e999"}, "hbm_bandwidth: cannot read '1e999' as a finite number"),
    ({"hbm_bandwidth": float("nan")}, "hbm_bandwidth: cannot read nan as a finite number"),
    ({"peak_flops": {"bf16": float("inf")}}, "peak_flops.bf16: cannot read inf"),
    ({"hbm_bandwidth": "2e21"}, r"hbm_bandwidth '2e21' is out of range \(at most 1e\+21\)"),
    ({"peak_flops": {"bf16": "2e6 PFLOPS"}}, "peak_flops.bf16 '2e6 PFLOPS' is out of range"),
    ({"memory_bytes": 2**61}, "memory_bytes 2305843009213693952 is out of range"),
    ({"memory_gb": 1e12}, "memory_gb 1000000000000.0 is out of range"),
    ({"ssd_bytes": "2 EB"}, "ssd_bytes: cannot read '2 EB'"),
    ({"host_dram_bytes": True}, "host_dram_bytes: cannot read True"),
    ({"name": 5}, "name must be a string, got 5"),
    ({"name": "x" * 257}, "name must be at most 256 printable characters, got 'xxxx"),
    ({"name": "a\x1b[31mred"}, r"name must be at most 256 printable characters, got 'a\\x1b\[31mred'"),
    ({"description": ["a"]}, r"description must be a string, got \['a'\]"),
    ({"sources": {"hbm_bandwidth": 1}}, "sources: 'hbm_bandwidth' must map a field name to a string, got 1"),
    ({"calibration": [1]}, "calibration must be a mapping"),
    ({7: 1}, "unknown key 7"),
])
def test_hardware_numbers_are_finite_and_bounded_and_fields_typed(change, message):
    with pytest.raises(KvsimError, match=message) as exc:
        load_hardware({**MINIMAL, **change})
    assert str(exc.value).startswith("inline hardware:") and "\n" not in str(exc.value)


def test_bounds_admit_the_biggest_real_numbers():
    hw = load_hardware({**MINIMAL, "hbm_bandwidth": "1000 PB/s", "memory_bytes": 2**60,
                        "ssd_bytes": "1024 PiB"})
    assert (hw.hbm_bandwidth, hw.memory_bytes, hw.ssd_bytes) == (1e18, 2**60, 2**60)


def test_scan_lists_good_profiles_and_one_error_per_bad_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KVSIM_HARDWARE_DIR", str(tmp_path))
    lines = [f"{k}: {v}" for k, v in MINIMAL.items() if k != "peak_flops"] + ["peak_flops: {bf16: 1.0e+15}"]
    (tmp_path / "good.yaml").write_text("\n".join(lines) + "\n")
    (tmp_path / "bad.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    (tmp_path / "nan.yaml").write_text("\n".join(lines).replace("2 TB/s", ".nan") + "\n")
    (tmp_path / "folder.yaml").mkdir()
    got = {path.name: result for path, result in scan_hardware()}
    assert list(got) == ["bad.yaml", "folder.yaml", "good.yaml", "nan.yaml"]
    assert isinstance(got["good.yaml"], HardwareSpec) and got["good.yaml"].name == "good"
    assert "bad.yaml:1: not UTF-8 text" in str(got["bad.yaml"])
    assert "folder.yaml: is a directory" in str(got["folder.yaml"])
    assert "nan.yaml:2: number '.nan' is not finite" in str(got["nan.yaml"])
    for result in got.values():
        assert isinstance(result, HardwareSpec) or "\n" not in str(result)
    with pytest.raises(KvsimError, match="bad.yaml:1: not UTF-8 text"):
        load_hardware("bad")
    assert list_hardware() == ["bad", "folder", "good", "nan"]


def test_odd_hardware_names_are_quoted_in_one_line():
    for name in ("a\nb", "x" * 5000, "nul\x00name"):
        with pytest.raises(KvsimError, match="unknown hardware") as exc:
            load_hardware(name)
        assert "\n" not in str(exc.value) and len(str(exc.value)) < 400


def test_mi300x_all_reduce_bandwidth_depends_on_tp_and_nvswitch_profiles_keep_one_figure():
    mi300x = load_hardware("mi300x")
    assert mi300x.interconnect_bandwidth_by_tp == {2: 64e9, 4: 192e9, 8: 448e9}
    assert mi300x.sources["interconnect_bandwidth_by_tp"]
    for name in ("a100-40gb", "a100-80gb", "h100-sxm", "h200", "l40s", "cpu"):
        assert load_hardware(name).interconnect_bandwidth_by_tp is None
    assert load_hardware({**MINIMAL, "interconnect_bandwidth_by_tp": {4: "100 GB/s", "2": 5e10}}) \
        .interconnect_bandwidth_by_tp == {2: 5e10, 4: 1e11}  # a JSON key (a string of digits) is a TP size


@pytest.mark.parametrize("value, message", [
    ([64e9], r"interconnect_bandwidth_by_tp must map tensor-parallel sizes \(2, 4, 8, ...\) to bandwidths"),
    ({}, "interconnect_bandwidth_by_tp must map tensor-parallel sizes"),
    ({"four": 1e11}, r"interconnect_bandwidth_by_tp: 'four' is not a tensor-parallel size \(an integer in"
                  r" \[2, 1024\]\)"),
    ({1: 1e11}, "interconnect_bandwidth_by_tp: 1 is not a tensor-parallel size"),
    ({True: 1e11}, "interconnect_bandwidth_by_tp: True is not a tensor-parallel size"),
    ({4: 0}, r"interconnect_bandwidth_by_tp.4 must be > 0, got 0"),
    ({4: "fast"}, "interconnect_bandwidth_by_tp.4: cannot read 'fast' as a finite number"),
    ({8: "2e21"}, r"interconnect_bandwidth_by_tp.8 '2e21' is out of range"),
])
def test_bad_interconnect_bandwidth_by_tp_is_one_line_naming_the_key(value, message):
    with pytest.raises(KvsimError, match=message) as exc:
        load_hardware({**MINIMAL, "interconnect_bandwidth_by_tp": value})
    assert str(exc.value).startswith("inline hardware:") and "\n" not in str(exc.value)


def test_bad_interconnect_bandwidth_by_tp_in_a_file_names_the_file(tmp_path):
    lines = [f"{k}: {v}" for k, v in MINIMAL.items() if k != "peak_flops"]
    path = tmp_path / "mesh.yaml"
    lines += ["peak_flops: {bf16: 1.0e+15}", "interconnect_bandwidth_by_tp: {4: -1}"]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(KvsimError, match=r"mesh.yaml: interconnect_bandwidth_by_tp.4 must be > 0"):
        load_hardware(str(path))


def test_nvlink_domains_of_the_shipped_profiles_and_bad_values():
    domains = {name: load_hardware(name).nvlink_domain for name in
               ("a100-80gb", "h100-sxm", "h200", "b200", "gb200", "mi300x", "l40s", "cpu")}
    assert domains == {"a100-80gb": 8, "h100-sxm": 8, "h200": 8, "b200": 8, "gb200": 72, "mi300x": 8,
                       "l40s": 0, "cpu": 0}
    assert "72 GPUs in one NVLink domain" in load_hardware("gb200").sources["nvlink_domain"]
    assert load_hardware(MINIMAL).nvlink_domain == 0
    for bad in (-1, 2.5, True, "eight", 4096):
        with pytest.raises(KvsimError, match=r"inline hardware: nvlink_domain must be an integer in \[0, 10"):
            load_hardware({**MINIMAL, "nvlink_domain": bad})
