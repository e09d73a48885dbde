import math

import numpy as np
import pytest

from kvsim.errors import KvsimError
from kvsim.workload.config import LengthDist, LengthPairs
from kvsim.workload.lengths import lognormal_params, sample_lengths, sample_pairs, sample_values


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_fixed():
    out = sample_lengths(LengthDist(dist="fixed", value=7), _rng(), 5)
    assert out.dtype == np.int64 and out.tolist() == [7] * 5


def test_uniform_inclusive_bounds():
    out = sample_lengths(LengthDist(dist="uniform", low=3, high=5), _rng(), 3000)
    assert set(out.tolist()) == {3, 4, 5}


def test_uniform_values_are_real_numbers():
    out = sample_values(LengthDist(dist="uniform", low=2, high=4), _rng(), 1000)
    assert out.min() >= 2 and out.max() <= 4
    assert np.any(out != np.round(out))


def test_lognormal_params_hand_computed():
    mu, sigma = lognormal_params(LengthDist(dist="lognormal", mean=150, p50=100))
    assert mu == pytest.approx(4.605170, abs=1e-6)  # ln 100
    assert sigma == pytest.approx(0.900516, abs=1e-6)  # sqrt(2 ln 1.5)
    mu, sigma = lognormal_params(LengthDist(dist="lognormal", mean=100, sigma=1.0))
    assert mu == pytest.approx(math.log(100) - 0.5)
    assert sigma == 1.0


def test_lognormal_median_and_mean():
    dist = LengthDist(dist="lognormal", mean=150, p50=100, max=10**9)
    out = sample_lengths(dist, _rng(1), 20_000)
    assert np.median(out) == pytest.approx(100, rel=0.03)
    assert out.mean() == pytest.approx(150, rel=0.04)
    out = sample_lengths(LengthDist(dist="lognormal", mean=300, sigma=0.5, max=10**9), _rng(2), 20_000)
    assert out.mean() == pytest.approx(300, rel=0.02)


def test_clip_to_min_max_and_at_least_one():
    dist = LengthDist(dist="lognormal", mean=150, p50=100, min=50, max=200)
    out = sample_lengths(dist, _rng(3), 5000)
    assert out.min() == 50 and out.max() == 200
    tiny = sample_lengths(LengthDist(dist="lognormal", mean=1.2, p50=1.0), _rng(4), 5000)
    assert tiny.min() >= 1


def test_empirical_only_file_values(tmp_path):
    path = tmp_path / "lens.txt"
    path.write_text("# prompt lengths\n10\n\n20\n35\n")
    out = sample_lengths(LengthDist(dist="empirical", path=str(path)), _rng(5), 2000)
    assert set(out.tolist()) == {10, 20, 35}


def test_empirical_csv_column_and_base_dir(tmp_path):
    (tmp_path / "t.csv").write_text("a,b\n1,100\n2,200\n")
    dist = LengthDist(dist="empirical", path="t.csv", column="b")
    out = sample_lengths(dist, _rng(6), 500, base_dir=tmp_path)
    assert set(out.tolist()) == {100, 200}


def test_pairs_keep_rows_together(tmp_path):
    (tmp_path / "p.csv").write_text("prompt,output,x\n10,100,0\n20,200,0\n30.4,0.2,0\n")
    prompt, output = sample_pairs(LengthPairs(path="p.csv"), _rng(3), 600, base_dir=tmp_path)
    assert prompt.dtype == output.dtype == np.int64
    # each draw is one row: (10, 100), (20, 200) or (30, 1) (rounded, at least 1), never a mix
    assert set(zip(prompt.tolist(), output.tolist(), strict=True)) == {(10, 100), (20, 200), (30, 1)}
    again = sample_pairs(LengthPairs(path="p.csv"), _rng(3), 600, base_dir=tmp_path)
    assert again[0].tolist() == prompt.tolist() and again[1].tolist() == output.tolist()


def test_pairs_other_columns_and_errors(tmp_path):
    (tmp_path / "q.csv").write_text("in,out\n5,7\n")
    prompt, output = sample_pairs(LengthPairs(path=str(tmp_path / "q.csv"), prompt_column="in",
                                              output_column="out"), _rng(), 4)
    assert prompt.tolist() == [5] * 4 and output.tolist() == [7] * 4
    with pytest.raises(KvsimError, match=r"q\.csv:1: no column 'prompt'"):
        sample_pairs(LengthPairs(path=str(tmp_path / "q.csv")), _rng(), 4)
    (tmp_path / "short.csv").write_text("prompt,output\n5,7\n6\n")
    with pytest.raises(KvsimError, match=r"short\.csv:3: row has no 'output' field"):
        sample_pairs(LengthPairs(path=str(tmp_path / "short.csv")), _rng(), 4)


def test_empirical_errors(tmp_path):
    with pytest.raises(KvsimError, match="not found"):
        sample_lengths(LengthDist(dist="empirical", path=str(tmp_path / "nope.txt")), _rng(), 3)
    bad = tmp_path / "bad.txt"
    bad.write_text("10\n20\nabc\n")
    with pytest.raises(KvsimError, match=r"bad\.txt:3: bad value 'abc'"):
        sample_lengths(LengthDist(dist="empirical", path=str(bad)), _rng(), 3)
    neg = tmp_path / "neg.csv"
    neg.write_text("x\n5\n-4\n")
    with pytest.raises(KvsimError, match=r"neg\.csv:3:"):
        sample_lengths(LengthDist(dist="empirical", path=str(neg), column="x"), _rng(), 3)
    with pytest.raises(KvsimError, match=r"neg\.csv:1: no column 'y'"):
        sample_lengths(LengthDist(dist="empirical", path=str(neg), column="y"), _rng(), 3)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n# nothing\n")
    with pytest.raises(KvsimError, match="no values"):
        sample_lengths(LengthDist(dist="empirical", path=str(empty)), _rng(), 3)


@pytest.mark.parametrize("value", ["inf", "1e19", "true", "nan", "-1", "1" * 400])
def test_empirical_values_are_finite_and_bounded(tmp_path, value):
    path = tmp_path / "v.txt"
    path.write_text(f"10\n{value}\n")
    with pytest.raises(KvsimError) as info:
        sample_lengths(LengthDist(dist="empirical", path=str(path)), _rng(), 3)
    assert str(info.value).startswith(f"{path}:2: bad value ")
    assert str(info.value).endswith("(expected a number from 0 to 1,000,000,000)")


@pytest.mark.parametrize(("content", "column", "expected"), [
    (b"10\n1\xe9\n", None, "{path}:2: not UTF-8 text (byte 2 of the line)"),
    (b"root:x:0:0:root:/root:/bin/bash\n", "x",
     "{path}:1: no column 'x' (1 field(s), none like a column name)"),
    (b'x\n"' + b"9" * 200_000 + b'"\n', "x", "{path}:2: bad CSV ('field larger than field limit (131072)')"),
])
def test_empirical_files_that_are_no_length_file(tmp_path, content, column, expected):
    path = tmp_path / "v.txt"
    path.write_bytes(content)
    with pytest.raises(KvsimError) as info:
        sample_lengths(LengthDist(dist="empirical", path=str(path), column=column), _rng(), 3)
    assert str(info.value) == expected.format(path=path)


def test_empirical_directory(tmp_path):
    with pytest.raises(KvsimError, match="is a directory, expected a length file"):
        sample_lengths(LengthDist(dist="empirical", path=str(tmp_path)), _rng(), 3)


def test_empirical_file_is_read_once_per_version(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("10\n")
    dist = LengthDist(dist="empirical", path=str(path))
    assert sample_lengths(dist, _rng(), 3).tolist() == [10, 10, 10]
    path.write_text("200\n300\n")  # another size: a new version
    assert set(sample_lengths(dist, _rng(), 50).tolist()) == {200, 300}
