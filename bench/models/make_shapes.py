#!/usr/bin/python3
"""Writes the parameter-tensor shapes of ResNet-50 and BERT-base, one tensor a line
("name d0xd1x..."), in the order the models declare them (torchvision's resnet50 and
Hugging Face's bert-base-uncased, whose parameter lists this reproduces from the
architectures: no weights are downloaded).

  /usr/bin/python3 bench/models/make_shapes.py   # rewrites resnet50.shapes, bert_base.shapes
"""
import os


def resnet50():
    t = [("conv1.weight", (64, 3, 7, 7)), ("bn1.weight", (64,)), ("bn1.bias", (64,))]
    inplanes = 64
    for layer, (planes, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)], 1):
        for b in range(blocks):
            p = f"layer{layer}.{b}"
            t += [(f"{p}.conv1.weight", (planes, inplanes, 1, 1)), (f"{p}.bn1.weight", (planes,)),
                  (f"{p}.bn1.bias", (planes,)),
                  (f"{p}.conv2.weight", (planes, planes, 3, 3)), (f"{p}.bn2.weight", (planes,)),
                  (f"{p}.bn2.bias", (planes,)),
                  (f"{p}.conv3.weight", (planes * 4, planes, 1, 1)),
                  (f"{p}.bn3.weight", (planes * 4,)), (f"{p}.bn3.bias", (planes * 4,))]
            if b == 0:
                t += [(f"{p}.downsample.0.weight", (planes * 4, inplanes, 1, 1)),
                      (f"{p}.downsample.1.weight", (planes * 4,)),
                      (f"{p}.downsample.1.bias", (planes * 4,))]
            inplanes = planes * 4
    t += [("fc.weight", (1000, 2048)), ("fc.bias", (1000,))]
    return t


def bert_base(vocab=30522, hidden=768, layers=12, intermediate=3072, positions=512):
    e = "embeddings"
    t = [(f"{e}.word_embeddings.weight", (vocab, hidden)),
         (f"{e}.position_embeddings.weight", (positions, hidden)),
         (f"{e}.token_type_embeddings.weight", (2, hidden)),
         (f"{e}.LayerNorm.weight", (hidden,)), (f"{e}.LayerNorm.bias", (hidden,))]
    for i in range(layers):
        p = f"encoder.layer.{i}"
        for m in ("query", "key", "value"):
            t += [(f"{p}.attention.self.{m}.weight", (hidden, hidden)),
                  (f"{p}.attention.self.{m}.bias", (hidden,))]
        t += [(f"{p}.attention.output.dense.weight", (hidden, hidden)),
              (f"{p}.attention.output.dense.bias", (hidden,)),
              (f"{p}.attention.output.LayerNorm.weight", (hidden,)),
              (f"{p}.attention.output.LayerNorm.bias", (hidden,)),
              (f"{p}.intermediate.dense.weight", (intermediate, hidden)),
              (f"{p}.intermediate.dense.bias", (intermediate,)),
              (f"{p}.output.dense.weight", (hidden, intermediate)),
              (f"{p}.output.dense.bias", (hidden,)),
              (f"{p}.output.LayerNorm.weight", (hidden,)), (f"{p}.output.LayerNorm.bias", (hidden,))]
    t += [("pooler.dense.weight", (hidden, hidden)), ("pooler.dense.bias", (hidden,))]
    return t


def write(path, model, tensors):
    total = 0
    with open(path, "w") as f:
        count = len(tensors)
        for _, shape in tensors:
            n = 1
            for d in shape:
                n *= d
            total += n
        f.write(f"# {model}: {count} parameter tensors, {total} parameters "
                f"(bench/models/make_shapes.py)\n")
        for name, shape in tensors:
            f.write(f"{name} {'x'.join(map(str, shape))}\n")
    print(f"{path}: {count} tensors, {total} parameters")


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    write(os.path.join(here, "resnet50.shapes"), "ResNet-50 (torchvision)", resnet50())
    write(os.path.join(here, "bert_base.shapes"), "BERT-base (bert-base-uncased)", bert_base())
