#!/usr/bin/python3
"""Generate deterministic float32 "real model" ONNX graphs (opset 17) for benchmarks.

Usage: /usr/bin/python3 gen_real_models.py OUTDIR [--only NAME ...] [--force]

Four convnets of different families, laid out the way public exporters write them
(torch.onnx for torchvision / ultralytics, paddle2onnx for PaddleOCR): random He-scaled
weights from a fixed seed, static input shapes. They exist to find where nxrt is slow on
real graphs, so they use the ops those graphs use: non-3x3, strided and dilated convs
followed by Relu, Resize (nearest/asymmetric and linear/half_pixel), Pad, Concat, Slice,
Transpose, Reshape, Flatten, Sigmoid, HardSwish, HardSigmoid, unfused BatchNormalization,
GlobalAveragePool, MaxPool with non-square windows, MatMul + Softmax.
Models:
    det_fpn       YOLOv8n-shaped detector at 1x3x320x320: CSP (Slice split, Bottleneck
                  Add, Concat) backbone with stride 8/16/32 outputs and SPPF, FPN top-down
                  path with Resize (nearest, x2, asymmetric) + Concat, 3x3/1x1 box and
                  class heads (Sigmoid), levels flattened and concatenated -> 1x2100x144
    seg_dilated   DeepLabV3-shaped segmenter at 1x3x256x256: ResNet-style backbone at
                  output stride 16 (dilation 2 in the last stage), ASPP with dilated 3x3
                  convs (6, 12, 18) and a GlobalAveragePool branch, unfused BatchNorm,
                  Concat, 1x1 conv, bilinear Resize (half_pixel) back to 256x256 -> 1x21x256x256
    ocr_crnn      CRNN / PaddleOCR-rec-shaped recognizer at 1x3x32x320: conv stack with
                  unfused BatchNorm, 5x5, 3x1 and (2,1)-strided convs, MaxPool (2,1),
                  Reshape/Transpose to a 80-step sequence, MatMul+Add head, Softmax over
                  6625 characters -> 1x80x6625
    mobilenet_v3  torchvision MobileNetV3-Large classifier at 1x3x224x224: depthwise 3x3
                  and 5x5 (stride 1/2), HardSwish, squeeze-excite (GlobalAveragePool, 1x1
                  convs, Relu, HardSigmoid, Mul), Flatten + Gemm head -> 1x1000
Each NAME.onnx gets a NAME.json sidecar in the gen_bench_models.py format (inputs: name,
shape, dtype) for ORT's bench.js --inputs-from. Every model passes onnx.checker
(full_check) and strict shape inference; output is byte-identical across runs.
"""
import collections
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_bench_models  # noqa: E402
from gen_bench_models import GraphBuilder  # noqa: E402

GENERATOR_VERSION = 1


class Net(GraphBuilder):
    """GraphBuilder plus the layer patterns exporters emit."""

    def conv(self, x, cin, cout, k, stride=1, dilation=1, group=1, pads=None, act="relu", bias=True):
        """Conv with the BatchNorm folded into its bias (torch.onnx in eval mode) + activation.
        k, stride: int or (h, w). pads default to 'same' for stride 1 (dilation * (k-1) / 2)."""
        kh, kw = (k, k) if isinstance(k, int) else k
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        if pads is None:
            ph, pw = dilation * (kh - 1) // 2, dilation * (kw - 1) // 2
            pads = [ph, pw, ph, pw]
        fan_in = cin // group * kh * kw
        gain = 2.0 if act in ("relu", "hardswish") else 1.0
        w = self.randn("conv_W", (cout, cin // group, kh, kw), np.sqrt(gain / fan_in))
        ins = [x, w] + ([self.randn("conv_B", (cout,), 0.05)] if bias else [])
        x = self.op("Conv", ins, kernel_shape=[kh, kw], strides=[sh, sw], pads=pads,
                    dilations=[dilation, dilation], group=group)
        return self.activation(x, act)

    def activation(self, x, act):
        if act == "relu":
            return self.op("Relu", [x])
        if act == "hardswish":
            return self.op("HardSwish", [x])
        assert act is None, act
        return x

    def bn(self, x, c, act="relu"):
        """An unfused BatchNormalization (paddle2onnx, or torch exports that keep it)."""
        x = self.op("BatchNormalization", [x, self.uniform("bn_scale", (c,), 0.5, 1.5),
                                           self.uniform("bn_B", (c,), -0.1, 0.1),
                                           self.uniform("bn_mean", (c,), -0.1, 0.1),
                                           self.uniform("bn_var", (c,), 0.5, 1.5)], epsilon=1e-5)
        return self.activation(x, act)

    def conv_bn(self, x, cin, cout, k, stride=1, dilation=1, pads=None, act="relu"):
        return self.bn(self.conv(x, cin, cout, k, stride, dilation, pads=pads, act=None, bias=False), cout, act)

    def i64(self, prefix, values):
        return self.const(prefix, np.array(values, np.int64))

    def f32(self, prefix, values):
        return self.const(prefix, np.array(values, np.float32))


# ---------------------------------------------------------------- det_fpn

def build_det_fpn(seed, size=320, classes=80):
    b = Net(seed)

    def split2(x, c):  # torch.chunk(2, 1) as older exporters write it: two Slices
        lo = b.op("Slice", [x, b.i64("sl_start", [0]), b.i64("sl_end", [c // 2]), b.i64("sl_axes", [1])])
        hi = b.op("Slice", [x, b.i64("sl_start", [c // 2]), b.i64("sl_end", [c]), b.i64("sl_axes", [1])])
        return lo, hi

    def c2f(x, cin, cout, n, shortcut):
        """ultralytics C2f: 1x1, split, n Bottlenecks (3x3, 3x3, + Add), Concat, 1x1."""
        y = b.conv(x, cin, cout, 1)
        parts = list(split2(y, cout))
        h = cout // 2
        for _ in range(n):
            z = b.conv(b.conv(parts[-1], h, h, 3), h, h, 3)
            parts.append(b.op("Add", [parts[-1], z]) if shortcut else z)
        return b.conv(b.op("Concat", parts, axis=1), (2 + n) * h, cout, 1)

    def up2(x):  # nn.Upsample(scale_factor=2, mode='nearest') as torch.onnx writes it (opset 17)
        return b.op("Resize", [x, "", b.f32("up_scales", [1, 1, 2, 2])], mode="nearest",
                    coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    # Stem: TF-style 'same' padding as an explicit Pad before a pad-free stride-2 conv.
    x = b.op("Pad", ["images", b.i64("pad", [0, 0, 0, 0, 0, 0, 1, 1])], mode="constant")
    x = b.conv(x, 3, 16, 3, 2, pads=[0, 0, 0, 0])          # 16 x 160
    x = b.conv(x, 16, 32, 3, 2)                            # 32 x 80
    x = c2f(x, 32, 32, 1, True)
    x = b.conv(x, 32, 64, 3, 2)                            # 64 x 40
    p3 = c2f(x, 64, 64, 2, True)
    x = b.conv(p3, 64, 128, 3, 2)                          # 128 x 20
    p4 = c2f(x, 128, 128, 2, True)
    x = b.conv(p4, 128, 256, 3, 2)                         # 256 x 10
    x = c2f(x, 256, 256, 1, True)
    # SPPF: 1x1, three chained 5x5 MaxPools, Concat, 1x1.
    y = b.conv(x, 256, 128, 1)
    pools = [y]
    for _ in range(3):
        pools.append(b.op("MaxPool", [pools[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]))
    p5 = b.conv(b.op("Concat", pools, axis=1), 512, 256, 1)
    # FPN top-down path.
    t4 = c2f(b.op("Concat", [up2(p5), p4], axis=1), 384, 128, 1, False)     # 128 x 20
    t3 = c2f(b.op("Concat", [up2(t4), p3], axis=1), 192, 64, 1, False)      # 64 x 40
    # Decoupled heads per level: box (3x3, 3x3, 1x1 -> 4*16 DFL bins) and class (-> Sigmoid).
    outs = []
    for feat, c, hw in ((t3, 64, size // 8), (t4, 128, size // 16), (p5, 256, size // 32)):
        box = b.conv(b.conv(b.conv(feat, c, 64, 3), 64, 64, 3), 64, 64, 1, act=None)
        cls = b.conv(b.conv(b.conv(feat, c, 80, 3), 80, 80, 3), 80, classes, 1, act=None)
        head = b.op("Concat", [box, b.op("Sigmoid", [cls])], axis=1)
        outs.append(b.op("Reshape", [head, b.i64("head_shape", [1, 64 + classes, hw * hw])]))
    x = b.op("Concat", outs, axis=2)
    x = b.op("Transpose", [x], perm=[0, 2, 1])
    n = sum((size // s) ** 2 for s in (8, 16, 32))
    return b.model("det_fpn", [("images", [1, 3, size, size])], [("output", [1, n, 64 + classes])], x)


# ---------------------------------------------------------------- seg_dilated

def build_seg_dilated(seed, size=256, classes=21):
    b = Net(seed)

    def basic_block(x, cin, cout, stride, dilation):
        y = b.conv(x, cin, cout, 3, stride, dilation)
        y = b.conv(y, cout, cout, 3, 1, dilation, act=None)
        short = x if (stride == 1 and cin == cout) else b.conv(x, cin, cout, 1, stride, act=None)
        return b.op("Relu", [b.op("Add", [y, short])])

    x = b.conv("input", 3, 32, 7, 2)                                            # 32 x 128
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])  # 64
    cin = 32
    # (channels, stride, dilation): output stride 16, the last stage dilated instead of strided.
    for cout, stride, dil in ((32, 1, 1), (64, 2, 1), (128, 2, 1), (256, 1, 2)):
        x = basic_block(x, cin, cout, stride, dil)
        x = basic_block(x, cout, cout, 1, dil)
        cin = cout
    feat = size // 16
    # ASPP (torchvision DeepLabHead): 1x1, three dilated 3x3, image pooling; each Conv + BN + Relu.
    branches = [b.conv_bn(x, 256, 128, 1)]
    for d in (6, 12, 18):
        branches.append(b.conv_bn(x, 256, 128, 3, dilation=d))
    pool = b.conv_bn(b.op("GlobalAveragePool", [x]), 256, 128, 1)
    branches.append(b.op("Resize", [pool, "", "", b.i64("pool_size", [1, 128, feat, feat])],
                         mode="linear", coordinate_transformation_mode="half_pixel"))
    x = b.conv_bn(b.op("Concat", branches, axis=1), 5 * 128, 128, 1)
    x = b.conv_bn(x, 128, 128, 3)
    x = b.conv(x, 128, classes, 1, act=None)
    # F.interpolate(size=input, mode='bilinear', align_corners=False)
    x = b.op("Resize", [x, "", "", b.i64("out_size", [1, classes, size, size])],
             mode="linear", coordinate_transformation_mode="half_pixel")
    return b.model("seg_dilated", [("input", [1, 3, size, size])], [("out", [1, classes, size, size])], x)


# ---------------------------------------------------------------- ocr_crnn

def build_ocr_crnn(seed, height=32, width=320, chars=6625):
    b = Net(seed)
    x = b.conv_bn("x", 3, 32, 3)                                                 # 32 x 32x320
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])                # 16x160
    x = b.conv_bn(x, 32, 64, 3)
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])                # 8x80
    x = b.conv_bn(x, 64, 128, 3)
    x = b.conv_bn(x, 128, 128, 5)                                                # 5x5
    x = b.op("MaxPool", [x], kernel_shape=[2, 1], strides=[2, 1])                # 4x80
    x = b.conv_bn(x, 128, 256, (3, 1))                                           # 3x1
    x = b.conv_bn(x, 256, 256, (1, 3))                                           # 1x3
    x = b.conv_bn(x, 256, 256, 3)
    x = b.op("MaxPool", [x], kernel_shape=[2, 1], strides=[2, 1])                # 2x80
    x = b.conv_bn(x, 256, 256, (2, 1), stride=(2, 1), pads=[0, 0, 0, 0])         # 1x80
    steps = width // 4
    x = b.op("Reshape", [x, b.i64("seq_shape", [1, 256, steps])])
    x = b.op("Transpose", [x], perm=[0, 2, 1])                                   # 1 x 80 x 256
    x = b.op("Add", [b.op("MatMul", [x, b.randn("fc1_W", (256, 256), np.sqrt(2.0 / 256))]),
                     b.randn("fc1_B", (256,), 0.05)])
    x = b.op("HardSwish", [x])
    x = b.op("Add", [b.op("MatMul", [x, b.randn("fc2_W", (256, chars), np.sqrt(1.0 / 256))]),
                     b.randn("fc2_B", (chars,), 0.05)])
    x = b.op("Softmax", [x], axis=2)
    return b.model("ocr_crnn", [("x", [1, 3, height, width])], [("softmax", [1, steps, chars])], x)


# ---------------------------------------------------------------- mobilenet_v3

# torchvision mobilenet_v3_large: (kernel, expanded, out, use_se, activation, stride)
MBV3_LARGE = [(3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
              (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
              (3, 240, 80, False, "hardswish", 2), (3, 200, 80, False, "hardswish", 1),
              (3, 184, 80, False, "hardswish", 1), (3, 184, 80, False, "hardswish", 1),
              (3, 480, 112, True, "hardswish", 1), (3, 672, 112, True, "hardswish", 1),
              (5, 672, 160, True, "hardswish", 2), (5, 960, 160, True, "hardswish", 1),
              (5, 960, 160, True, "hardswish", 1)]


def build_mobilenet_v3(seed, size=224, classes=1000):
    b = Net(seed)

    def squeeze_excite(x, c):
        s = _make_divisible(c // 4)
        y = b.op("GlobalAveragePool", [x])
        y = b.conv(y, c, s, 1)
        y = b.conv(y, s, c, 1, act=None)
        y = b.op("HardSigmoid", [y], alpha=1.0 / 6, beta=0.5)
        return b.op("Mul", [x, y])

    x = b.conv("input", 3, 16, 3, 2, act="hardswish")                            # 16 x 112
    cin = 16
    for k, mid, cout, se, act, stride in MBV3_LARGE:
        y = x if mid == cin else b.conv(x, cin, mid, 1, act=act)                 # expand
        y = b.conv(y, mid, mid, k, stride, group=mid, act=act)                   # depthwise
        if se:
            y = squeeze_excite(y, mid)
        y = b.conv(y, mid, cout, 1, act=None)                                    # project
        x = b.op("Add", [x, y]) if (stride == 1 and cin == cout) else y
        cin = cout
    x = b.conv(x, cin, 960, 1, act="hardswish")                                  # 960 x 7
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    x = b.op("HardSwish", [b.op("Gemm", [x, b.randn("fc1_W", (1280, 960), np.sqrt(2.0 / 960)),
                                          b.randn("fc1_B", (1280,), 0.01)], transB=1)])
    x = b.op("Gemm", [x, b.randn("fc2_W", (classes, 1280), np.sqrt(1.0 / 1280)),
                      b.randn("fc2_B", (classes,), 0.01)], transB=1)
    return b.model("mobilenet_v3", [("input", [1, 3, size, size])], [("output", [1, classes])], x)


def _make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


MODELS = collections.OrderedDict([
    ("det_fpn", (build_det_fpn, 201, "YOLOv8n-shaped detector (CSP backbone, SPPF, FPN with nearest "
                                     "Resize, decoupled Sigmoid heads), 1x3x320x320 -> 1x2100x144")),
    ("seg_dilated", (build_seg_dilated, 202, "DeepLabV3-shaped segmenter (ResNet backbone at output "
                                             "stride 16, ASPP dilations 6/12/18, bilinear Resize), "
                                             "1x3x256x256 -> 1x21x256x256")),
    ("ocr_crnn", (build_ocr_crnn, 203, "CRNN-shaped text recognizer (conv stack with unfused BN, 5x5/3x1/1x3 "
                                       "convs, MaxPool (2,1), sequence MatMul + Softmax), 1x3x32x320 -> 1x80x6625")),
    ("mobilenet_v3", (build_mobilenet_v3, 204, "torchvision MobileNetV3-Large classifier (depthwise 3x3/5x5, "
                                               "HardSwish, squeeze-excite), 1x3x224x224 -> 1x1000")),
])


def generate(name, outdir, force):
    gen_bench_models.generate(name, outdir, force, MODELS, GENERATOR_VERSION, "nxrt-real-models")


def main():
    return gen_bench_models.main(MODELS, GENERATOR_VERSION, "nxrt-real-models", __doc__)


if __name__ == "__main__":
    sys.exit(main())
