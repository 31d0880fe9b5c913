"""Software components of a stack, grouped into the columns of the version matrix."""

from __future__ import annotations

# Column order of the matrix; "other" collects components no group names yet.
GROUPS = ("driver", "firmware", "runtime", "communication", "framework", "serving", "exporter", "other")
GROUP_TITLES = {
    "driver": "driver", "firmware": "firmware / vbios", "runtime": "runtime", "communication": "comm. library",
    "framework": "framework", "serving": "serving engine", "exporter": "exporter", "other": "other",
}
# Names as the vendor profiles' `versions` and the registry's `stack` write them. NVML ships with the driver,
# so it drifts with it and sits in the driver column.
_MEMBERS = {
    "driver": ("driver", "nvml", "kmd"),
    "firmware": ("firmware", "firmware_fit", "vbios", "inforom", "mcu", "bios"),
    "runtime": ("cuda", "rocm", "cann", "synapseai", "neuware", "cntoolkit", "oneapi"),
    "communication": ("nccl", "rccl", "hccl", "hccl_ascend", "hcclp", "oneccl", "cncl"),
    "framework": ("torch", "pytorch", "torch_npu", "torch_mlu", "habana_torch", "jax", "tensorflow", "mindspore",
                  "paddle", "transformers"),
    "serving": ("vllm", "vllm-ascend", "vllm-gaudi", "vllm-mlu", "sglang", "tgi", "triton", "tensorrt-llm",
                "lmdeploy", "mindie"),
    "exporter": ("exporter", "dcgm-exporter", "device-metrics-exporter", "npu-exporter", "gaudi-exporter",
                 "mlu-exporter", "dcgm"),
}
_GROUP_OF = {name: group for group, names in _MEMBERS.items() for name in names}
# A model's requirement on one of these is a framework requirement: it decides FRAMEWORK_INCOMPATIBLE.
FRAMEWORK_GROUPS = ("framework", "serving")


def group_of(component: str) -> str:
    """The matrix column a component belongs to ('other' for a name no group lists)."""
    name = component.strip().lower().replace("_", "-")
    return _GROUP_OF.get(name) or _GROUP_OF.get(name.replace("-", "_")) or (
        "exporter" if name.endswith("-exporter") else "other")
