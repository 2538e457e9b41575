#!/usr/bin/env bash
# The SDK carries no ring engine, reducer kernels or CUDA into a training process: a
# program linked against ringsync_client alone (the example trainer) has none of their
# symbols, and needs no CUDA library.
set -euo pipefail
binary="$1"
engine='CpuReducer|CudaReducer|RingAllReduce|RingExchange|RunRingPipeline|GrpcLink|cuda'
found=$(nm -C "$binary" | grep -E "$engine" || true)
if [[ -n "$found" ]]; then
  echo "the SDK links daemon code into $binary:"
  echo "$found" | head -20
  exit 1
fi
if ldd "$binary" | grep -i cuda; then
  echo "the SDK needs a CUDA library at run time"
  exit 1
fi
echo "no ring engine, reducer or CUDA symbols in $(basename "$binary")"
