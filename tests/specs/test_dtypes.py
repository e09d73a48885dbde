import pytest

from kvsim.errors import KvsimError
from kvsim.specs.dtypes import DTYPE_BYTES, dtype_bytes, normalize_dtype


def test_bytes_per_element():
    assert DTYPE_BYTES == {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5,
                           "mxfp4": 0.53125, "nvfp4": 0.5625, "fp8_block": 1.0}
    assert dtype_bytes("bf16") == 2
    assert dtype_bytes("int4") == 0.5


def test_hugging_face_names_and_case_map_to_ours():
    assert normalize_dtype("bfloat16") == "bf16"
    assert normalize_dtype("float16") == "fp16"
    assert normalize_dtype("FP8") == "fp8"
    assert dtype_bytes("float32") == 4


def test_unknown_dtype_is_a_one_line_error():
    with pytest.raises(KvsimError, match="unknown dtype 'fp6'") as exc:
        dtype_bytes("fp6")
    assert "\n" not in str(exc.value)
