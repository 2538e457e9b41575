"""ringsync for PyTorch.

* The torch.distributed backend "ringsync", registered on import:

      import ringsync.torch                 # registers the backend
      dist.init_process_group("ringsync", init_method=..., rank=r, world_size=n)
      model = DistributedDataParallel(model)

  Each process talks to its own ringsync worker, named by $RINGSYNC_WORKER
  ("unix:/run/ringsync/w0.sock"); rank r must use the worker of rank r.

* A Horovod-style API over a ringsync.Client:

      rs = ringsync.torch.init("unix:/run/ringsync/w0.sock")
      broadcast_parameters(model.state_dict(), root=0)
      optimizer = DistributedOptimizer(optimizer, model.named_parameters(),
                                       compression=Compression.fp16)   # optional
      broadcast_optimizer_state(optimizer, root=0)

* Elastic training, as Horovod Elastic's (ringsync.torch.elastic): TorchState(model,
  optimizer, batch=0) and @run around the training function, which resumes on the new
  ring when workers leave or join.
"""

from ringsync.torch import elastic
from ringsync.torch.backend import register_backend
from ringsync.torch.broadcast import broadcast_optimizer_state, broadcast_parameters
from ringsync.torch.compression import Compression
from ringsync.torch.optimizer import DistributedOptimizer
from ringsync.torch.session import client, init, shutdown

register_backend()

__all__ = ["Compression", "DistributedOptimizer", "broadcast_parameters", "elastic",
           "broadcast_optimizer_state", "init", "client", "shutdown", "register_backend"]
