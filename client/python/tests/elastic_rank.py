"""One rank of an elastic training job (ringsync.torch.elastic) for test_torch_elastic.py:
least squares on fixed data with SGD and momentum through DistributedOptimizer, each rank
taking every world_size-th sample from its rank on, as the ring is at each step.

The gradients are all-reduced as sums of the loss over all samples / their number, so
every step is the full-batch step whatever the world size and however the data is
sharded: after the job the parameters must equal (1e-9 relative) a single-process run of
the same steps, on every rank bitwise alike. Prints "step S world N" after each commit,
then "FINAL <parameters as hex floats>" and whether it matches the single-process run
(exit 1 if not)."""

import argparse
import time

import torch

import ringsync
import ringsync.torch as rst

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--step-pause", type=float, default=0.05)
args = parser.parse_args()

SAMPLES, FEATURES = 96, 6
generator = torch.Generator().manual_seed(1)
X = torch.randn(SAMPLES, FEATURES, dtype=torch.float64, generator=generator)
y = X @ torch.linspace(-1, 1, FEATURES, dtype=torch.float64) + 0.5


def new_model():
    torch.manual_seed(0)
    return torch.nn.Linear(FEATURES, 1).double()


def loss_of(model, rows):
    return (model(X[rows]).squeeze(1) - y[rows]).square().sum() / SAMPLES


rst.init()
model = new_model()
optimizer = rst.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                     model.named_parameters(), op=ringsync.SUM)
state = rst.elastic.TorchState(model, optimizer, batch=0)


@rst.elastic.run
def train(state):
    while state.batch < args.steps:
        client = rst.client()
        rank, world = client.rank, client.world_size
        optimizer.zero_grad()
        loss_of(model, list(range(rank, SAMPLES, world))).backward()
        optimizer.step()
        state.batch += 1
        state.commit()
        print(f"step {state.batch} world {world}", flush=True)
        time.sleep(args.step_pause)


train(state)
final = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
print("FINAL " + " ".join(v.hex() for v in final.tolist()), flush=True)

reference = new_model()
reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
for _ in range(args.steps):
    reference_optimizer.zero_grad()
    loss_of(reference, list(range(SAMPLES))).backward()
    reference_optimizer.step()
want = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
matches = torch.allclose(final, want, rtol=1e-9, atol=1e-12)
print(f"{'MATCHES' if matches else 'DIFFERS from'} the single-process run "
      f"(largest difference {(final - want).abs().max().item():.3g}; resets {state.resets})",
      flush=True)
rst.shutdown()
raise SystemExit(0 if matches else 1)
