"""Gradient compression for DistributedOptimizer, as Horovod's Compression: gradients
travel in a narrower floating-point type (half the bytes of float32 on the wire and in
the worker) and come back in their own. Lossy: each gradient is rounded to the narrower
type before it is reduced, and the reduction runs in it (float16 overflows past 65504,
bfloat16 keeps float32's range with 8 bits of mantissa).

    optimizer = DistributedOptimizer(optimizer, model.named_parameters(),
                                     compression=Compression.fp16)
"""

import torch


class _Uncompressed:
    def wire_dtype(self, dtype):
        return dtype

    def __repr__(self):
        return "Compression.none"


class _CastTo:
    def __init__(self, dtype, name):
        self._dtype = dtype
        self._name = name

    def wire_dtype(self, dtype):
        """The type a gradient of `dtype` travels in: ours for wider floating types."""
        if dtype.is_floating_point and torch.finfo(dtype).bits > torch.finfo(self._dtype).bits:
            return self._dtype
        return dtype

    def __repr__(self):
        return f"Compression.{self._name}"


class Compression:
    """How DistributedOptimizer's buckets travel: none (the gradients' own type), fp16
    (float16) or bf16 (bfloat16)."""
    none = _Uncompressed()
    fp16 = _CastTo(torch.float16, "fp16")
    bf16 = _CastTo(torch.bfloat16, "bf16")
