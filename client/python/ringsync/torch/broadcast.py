"""broadcast_parameters and broadcast_optimizer_state: make every rank start from root's
model and optimizer state, as Horovod's functions of the same names do."""

import torch

from ringsync.torch import session


def broadcast_parameters(params, root=0):
    """Copies root's tensors into every rank's, in place. `params`: a state_dict() or an
    iterable of (name, tensor) such as model.named_parameters(). Every rank must pass the
    same names, shapes and dtypes."""
    items = sorted(params.items()) if hasattr(params, "items") else sorted(params)
    rs = session.client()
    handles = []
    with torch.no_grad():
        for name, tensor in items:
            handles.append(rs.broadcast_async(tensor.data if hasattr(tensor, "data") else tensor,
                                              root, f"param/{name}"))
        for h in handles:
            h.wait()


def broadcast_optimizer_state(optimizer, root=0):
    """Copies root's optimizer state (per-parameter tensors such as momentum buffers, and
    the scalar hyper-parameters of each group) into every rank's optimizer.

    Ranks whose state is still empty (no step taken yet) get it created first by a step
    with zero gradients, as Horovod does, so every rank has the same tensors to receive.
    """
    if not optimizer.state_dict()["state"]:
        _initialize_state(optimizer)
    state = optimizer.state_dict()
    tensors = {}
    for param_id, param_state in state["state"].items():
        for key, value in param_state.items():
            if torch.is_tensor(value):
                tensors[f"state/{param_id}/{key}"] = value
    # Scalars (lr, momentum, step counts stored as numbers) travel as one float64 tensor.
    scalars = []
    for group in state["param_groups"]:
        for key in sorted(group):
            if key != "params" and isinstance(group[key], (int, float)) and not isinstance(group[key], bool):
                scalars.append((group, key))
    packed = torch.tensor([float(g[k]) for g, k in scalars], dtype=torch.float64)
    tensors["param_groups/scalars"] = packed
    broadcast_parameters(tensors, root)
    for (group, key), value in zip(scalars, packed.tolist()):
        group[key] = type(group[key])(value)
    optimizer.load_state_dict(state)


def _initialize_state(optimizer):
    # A step with zero gradients creates the state. The parameters are put back after it
    # (weight decay would move them), and it is the wrapped optimizer's own step, so a
    # DistributedOptimizer starts no collective here.
    saved = []
    with torch.no_grad():
        for group in optimizer.param_groups:
            for p in group["params"]:
                saved.append((p, p.grad, p.detach().clone()))
                p.grad = torch.zeros_like(p)
        local_step = getattr(optimizer, "_local_step", optimizer.step)
        local_step()
        for p, grad, value in saved:
            p.copy_(value)
            p.grad = grad
