"""One rank of an elastic training job (ringsync.torch.elastic) for test_torch_elastic.py:
least squares on fixed data with SGD and momentum through DistributedOptimizer.

Full batch (the default): each rank takes every world_size-th sample from its rank on, as
the ring is at each step, and the gradients are all-reduced as sums of the loss over all
samples / their number, so every step is the full-batch step whatever the world size and
however the data is sharded: after the job the parameters must equal (1e-9 relative) a
single-process run of the same steps. Prints "MATCHES" or "DIFFERS from" (exit 1).

--epochs=E: minibatches of 5 samples a rank from an ElasticSampler over 240 samples, E
epochs. A buffer of the model counts, per epoch and sample, how often the ranks together
took it in a committed step (each step all-reduces its own count): after the job every
sample must have been taken in every epoch, and at most a few twice (each re-sharing pads
the shares to equal length). Prints "SEEN ok" or "SEEN wrong: ..." (exit 1).

Either way it prints "step S world N" after each commit (S: commits so far) and "FINAL
<parameters, and the counts, as hex>", which must be bitwise alike on every rank."""

import argparse
import time

import torch

import ringsync
import ringsync.torch as rst

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--step-pause", type=float, default=0.05)
parser.add_argument("--epochs", type=int, default=0)
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


def step_done(state, world):
    state.commit()
    print(f"step {state.step} world {world}", flush=True)
    time.sleep(args.step_pause)


def full_batch(state):
    while state.batch < args.steps:
        client = rst.client()
        rank, world = client.rank, client.world_size
        optimizer.zero_grad()
        loss_of(model, list(range(rank, SAMPLES, world))).backward()
        optimizer.step()
        state.batch += 1
        step_done(state, world)


MINIBATCH_SAMPLES, MINIBATCH = 240, 5
X_MORE = torch.randn(MINIBATCH_SAMPLES, FEATURES, dtype=torch.float64, generator=generator)
Y_MORE = X_MORE.sum(1)


def minibatches(state):
    loader = torch.utils.data.DataLoader(range(MINIBATCH_SAMPLES), batch_size=MINIBATCH,
                                         sampler=state.sampler)
    for state.epoch in range(state.epoch, args.epochs):
        state.sampler.set_epoch(state.epoch)
        for rows in loader:
            world = state.sampler.shared_among
            taken = torch.zeros(MINIBATCH_SAMPLES, dtype=torch.int64)
            taken.index_add_(0, rows, torch.ones(len(rows), dtype=torch.int64))
            rst.client().allreduce_(taken, "taken", op=ringsync.SUM)
            optimizer.zero_grad()
            # The mean over the step's samples on every rank (the gradients are summed).
            loss = (model(X_MORE[rows]).squeeze(1) - Y_MORE[rows]).square().sum()
            (loss / (MINIBATCH * world)).backward()
            optimizer.step()
            with torch.no_grad():
                model.seen[state.epoch] += taken
            state.sampler.record_batch(len(rows))
            step_done(state, world)


rst.init()
model = new_model()
if args.epochs:
    model.register_buffer("seen", torch.zeros(args.epochs, MINIBATCH_SAMPLES, dtype=torch.int64))
optimizer = rst.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                     model.named_parameters(), op=ringsync.SUM)
if args.epochs:
    state = rst.elastic.TorchState(model, optimizer, epoch=0,
                                   sampler=rst.elastic.ElasticSampler(range(MINIBATCH_SAMPLES)))
else:
    state = rst.elastic.TorchState(model, optimizer, batch=0)
rst.elastic.run(minibatches if args.epochs else full_batch)(state)
final = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
words = [v.hex() for v in final.tolist()]
if args.epochs:
    words += [str(v) for v in model.seen.reshape(-1).tolist()]
print("FINAL " + " ".join(words), flush=True)

if args.epochs:
    seen = model.seen
    twice = int((seen - 1).clamp(min=0).sum())
    ok = bool((seen >= 1).all()) and twice <= 6 * args.epochs
    print(f"SEEN {'ok' if ok else 'wrong'}: least {int(seen.min())}, most {int(seen.max())}, "
          f"{twice} taken twice over {args.epochs} epochs (resets {state.resets})", flush=True)
    rst.shutdown()
    raise SystemExit(0 if ok else 1)

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
