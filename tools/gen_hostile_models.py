#!/usr/bin/python3
"""Hostile ONNX models: each one is wrong, or built to exhaust the host, in one named way.
Writes OUTDIR/<case>/model.onnx (plus whatever files the case needs: external data, links)
and OUTDIR/manifest.json, a list of {"name", "model", "expect", "what"}: `expect` is a
substring the host's one-line error must contain (it names the problem). The driver,
host/tests/hostile_models.py, runs each through `nxrt run --ep cpu`.

Usage: gen_hostile_models.py OUTDIR   (needs /usr/bin/python3 with onnx and numpy)
"""
import json
import os
import random
import shutil
import sys

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
BIG = 1 << 40  # two of these multiplied overflow int64; one of them is a 4 TiB float tensor


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, domains=()):
    g = helper.make_graph(nodes, "hostile", inputs, outputs, list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = ir
    return m


def vi(name, dims, t=F):
    return helper.make_tensor_value_info(name, t, dims)


def unknown(name, rank):
    """A value of `rank` unknown dimensions (the checker wants a shape on graph outputs)."""
    return vi(name, [f"d{i}" for i in range(rank)])


def relu_model():
    return model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])


def i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def raw_tensor(name, dims, raw, t=F):
    tp = TensorProto()
    tp.name, tp.data_type = name, t
    tp.dims.extend(dims)
    tp.raw_data = raw
    return tp


def external_tensor(name, dims, location, offset=None, length=None):
    tp = TensorProto()
    tp.name, tp.data_type = name, F
    tp.dims.extend(dims)
    tp.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = tp.external_data.add()
            e.key, e.value = k, str(v)
    return tp


def with_init(tensor):
    """y = x + tensor, with tensor an initializer of 2 floats (or whatever it claims)."""
    return model([helper.make_node("Add", ["x", tensor.name], ["y"])], [vi("x", [2])], [vi("y", [2])], [tensor])


def shape_target(op, target, x_dims=(1,)):
    """y = op(x, target) with target a constant int64 initializer (Reshape, Expand, Tile)."""
    return model([helper.make_node(op, ["x", "t"], ["y"])], [vi("x", list(x_dims))], [unknown("y", max(len(target), len(x_dims)))],
                 [i64("t", target)])


def runtime_shape(factor):
    """ConstantOfShape(Shape(x) * factor): the shape exists only at run time (no data
    propagation in shape inference), so only the kernels and the host's run-time checks see it."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Mul", ["s", "k"], ["big"]),
             helper.make_node("ConstantOfShape", ["big"], ["y"])]
    return model(nodes, [vi("x", [1, 1])], [unknown("y", 2)], [i64("k", factor)])


def nested_if(depth):
    """If inside If inside If ... `depth` deep; the innermost branches are Identity of x."""
    def leaf(level):
        return helper.make_graph([helper.make_node("Identity", ["x"], [f"e{level}"])], f"e{level}", [], [vi(f"e{level}", [2])])

    def branch(level):  # only the then-branch nests: a chain, not a tree of 2^depth
        out = f"t{level}"
        if level == depth:
            nodes = [helper.make_node("Identity", ["x"], [out])]
        else:
            nodes = [helper.make_node("If", ["c"], [out], then_branch=branch(level + 1), else_branch=leaf(level))]
        return helper.make_graph(nodes, out, [], [vi(out, [2])])
    top = helper.make_node("If", ["c"], ["y"], then_branch=branch(1), else_branch=leaf(0))
    return model([top], [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [2])])


def cases(out):
    """Yields (name, what, expect, writer); writer(case_dir) writes model.onnx and extras."""
    valid = relu_model().SerializeToString()
    rng = random.Random(15)

    def blob(data):
        return lambda d: open(os.path.join(d, "model.onnx"), "wb").write(data)

    def proto(m):
        return blob(m.SerializeToString())

    # --- not a model at all
    yield "empty_file", "zero bytes", "not a valid ONNX model", blob(b"")
    yield "truncated", "a valid model cut in half", "not a valid ONNX model", blob(valid[: len(valid) // 2])
    yield "random_bytes", "4 KiB of seeded random bytes", "not a valid ONNX model", blob(
        bytes(rng.randrange(256) for _ in range(4096)))
    yield "no_graph", "a ModelProto without a graph", "it has no graph", proto(ModelProto(ir_version=8))

    # --- graph structure
    yield "cycle", "a -> b -> a", "topologically sorted", proto(model(
        [helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])], [vi("x", [2])], [vi("b", [2])]))
    yield "self_loop", "a node that reads its own output", "topologically sorted", proto(model(
        [helper.make_node("Add", ["x", "y"], ["y"])], [vi("x", [2])], [vi("y", [2])]))
    yield "dangling_input", "a node reads a value nobody defines", "topologically sorted", proto(model(
        [helper.make_node("Add", ["x", "nobody"], ["y"])], [vi("x", [2])], [vi("y", [2])]))
    yield "duplicate_outputs", "two nodes write the same value", "SSA", proto(model(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])]))
    yield "duplicate_inputs", "a graph input listed twice", "'x'", proto(model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2]), vi("x", [2])], [vi("y", [2])]))
    yield "output_never_made", "a graph output no node produces", "'ghost'", proto(model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2]), vi("ghost", [2])]))

    # --- declared and stored shapes
    yield "negative_input_dim", "an input of shape [-5]", "negative dimension", proto(model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [-5])], [unknown("y", 1)]))
    yield "negative_initializer_dim", "an initializer of shape [-2]", "negative dimension", proto(with_init(
        raw_tensor("w", [-2], b"\0" * 8)))
    yield "input_dims_overflow", "an input of shape [2^40, 2^40, 2^40]", "overflows", proto(model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [BIG, BIG, BIG])], [unknown("y", 3)]))
    yield "initializer_dims_overflow", "an initializer of shape [2^40, 2^40] and no data", "more elements", proto(
        with_init(raw_tensor("w", [BIG, BIG], b"")))
    yield "initializer_size_mismatch", "float[2] with 3 bytes of raw data", "needs 8 bytes of data but has 3", proto(
        with_init(raw_tensor("w", [2], b"\0\0\0")))
    yield "initializer_claims_gigabytes", "float[2^30] (4 GiB) with 8 bytes of data", "needs 4294967296 bytes", proto(
        with_init(raw_tensor("w", [1 << 30], b"\0" * 8)))
    yield "input_claims_terabytes", "an input of shape [2^20, 2^20] (4 TiB) to generate", "out of host memory generating input 'x'", proto(model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1 << 20, 1 << 20])], [unknown("y", 2)]))

    # --- constants inside subgraphs, read by ONNX's shape inference (ParseData trusts raw_data's size)
    I64, B = TensorProto.INT64, TensorProto.BOOL
    short_axes = helper.make_node("Constant", [], ["axes"], value=raw_tensor("axes", [], b"\0", I64))
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), short_axes,
         helper.make_node("Unsqueeze", ["i", "axes"], ["u"])], "body",
        [vi("i", [], I64), vi("c_in", [], B)], [vi("c_out", [], B), unknown("u", 1)])
    yield "loop_body_constant_short", "a Constant int64 scalar with 1 byte of raw data in a Loop body", \
        "needs 8 bytes of data but has 1", proto(model(
            [helper.make_node("Loop", ["n", "c"], ["u_all"], body=body)], [vi("n", [], I64), vi("c", [], B)],
            [unknown("u_all", 2)]))
    typed = TensorProto(name="v", data_type=F, dims=[3], float_data=[1.0, 2.0])
    yield "constant_typed_short", "a Constant float[3] with 2 values in float_data", "needs 12 bytes of data but has 8", proto(model(
        [helper.make_node("Constant", [], ["y"], value=typed)], [], [unknown("y", 1)]))

    # --- shapes computed from constants (shape inference multiplies them)
    yield "reshape_overflow", "Reshape to [2^40, 2^40]", "overflows", proto(shape_target("Reshape", [BIG, BIG]))
    yield "expand_overflow", "Expand to [2^40, 2^40]", "overflows", proto(shape_target("Expand", [BIG, BIG]))
    yield "tile_overflow", "Tile by [2^40] twice", "overflows", proto(shape_target("Tile", [BIG, BIG], (1, 1)))
    yield "tile_negative", "Tile by -3", "negative dimension -3", proto(shape_target("Tile", [-3]))
    yield "constantofshape_overflow", "ConstantOfShape [2^40, 2^40]", "overflows", proto(model(
        [helper.make_node("ConstantOfShape", ["t"], ["y"])], [], [unknown("y", 2)], [i64("t", [BIG, BIG])]))
    yield "constantofshape_negative", "ConstantOfShape [-1]", "negative dim in [-1]", proto(model(
        [helper.make_node("ConstantOfShape", ["t"], ["y"])], [], [unknown("y", 1)], [i64("t", [-1])]))
    # --- shapes that exist only at run time
    yield "runtime_shape_terabytes", "ConstantOfShape(Shape(x) * 2^20): 4 TiB at run time", "out of host memory", proto(
        runtime_shape([1 << 20, 1 << 20]))
    yield "runtime_shape_overflow", "ConstantOfShape(Shape(x) * 2^40): overflows at run time", "more elements than a tensor may hold", proto(
        runtime_shape([BIG, BIG]))

    # --- external data
    def external(location, make_files=None, offset=None, length=None):
        def write(d):
            if make_files:
                make_files(d)
            m = with_init(external_tensor("w", [2], location, offset, length))
            open(os.path.join(d, "model.onnx"), "wb").write(m.SerializeToString())
        return write

    secret = os.path.join(out, "outside", "secret.bin")

    def symlink(d):
        os.symlink(secret, os.path.join(d, "w.bin"))

    def hardlink(d):
        os.link(secret, os.path.join(d, "w.bin"))

    def small(d):
        open(os.path.join(d, "w.bin"), "wb").write(b"\0" * 8)

    yield "external_dotdot", "external data at ../outside/secret.bin", "leaves the model's folder", external(
        "../outside/secret.bin")
    yield "external_absolute", "external data at an absolute path", "is absolute", external(secret)
    yield "external_symlink", "external data through a symlink to a file outside", "leaves the model's folder", external(
        "w.bin", symlink)
    yield "external_hardlink", "external data through a hard link to a file outside", "hard link", external(
        "w.bin", hardlink)
    yield "external_missing", "external data file that does not exist", "nope.bin", external("nope.bin")
    yield "external_length_past_end", "length 2^40 of an 8-byte file", "needs 1099511627776 bytes", external(
        "w.bin", small, length=BIG)
    yield "external_offset_overflow", "offset and length that overflow int64 when added", "past the end", external(
        "w.bin", small, offset=1 << 62, length=1 << 62)
    yield "external_offset_not_a_number", "offset 'abc'", "offset", external("w.bin", small, offset="abc")

    # --- versions and domains
    yield "unknown_domain", "an op of domain com.hostile that no EP knows", "com.hostile", proto(model(
        [helper.make_node("Steal", ["x"], ["y"], domain="com.hostile")], [vi("x", [2])], [vi("y", [2])],
        domains=["com.hostile"]))
    yield "future_ir_version", "IR version 99", "ir_version", proto(model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], ir=99))
    yield "future_opset", "opset 99 of the default domain", "newer than this build", proto(model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], opset=99))

    # --- ranks ONNX's convolution shape inference reads out of bounds (found by fuzz_graph_view)
    U8 = TensorProto.UINT8
    yield "convinteger_rank_mismatch", "ConvInteger with a rank-3 input and a rank-4 weight", "has rank 3 but weight", proto(model(
        [helper.make_node("ConvInteger", ["x", "w"], ["y"])], [vi("x", [1, 3, 3], U8), vi("w", [1, 1, 2, 2], U8)],
        [unknown("y", 3)], opset=10))
    yield "conv_rank_mismatch", "Conv with a rank-5 input and a rank-3 weight", "has rank 5 but weight", proto(model(
        [helper.make_node("Conv", ["x", "w"], ["y"])], [vi("x", [1, 1, 2, 2, 2]), vi("w", [1, 1, 2])], [unknown("y", 5)]))

    # --- nesting
    yield "if_nested_200", "If inside If, 200 deep", "nests subgraphs 200 deep", proto(nested_if(200))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "outside"))
    # What the external-data cases try to reach: outside every case's folder.
    with open(os.path.join(out, "outside", "secret.bin"), "wb") as f:
        f.write(b"SECRET!!")
    manifest = []
    for name, what, expect, write in cases(out):
        d = os.path.join(out, name)
        os.makedirs(d)
        write(d)
        manifest.append({"name": name, "model": os.path.join(d, "model.onnx"), "expect": expect, "what": what})
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{len(manifest)} hostile models in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
