"""nxrt Python module: sessions, numpy I/O (zero-copy both ways), providers, plugins, errors,
conformance. Run: PYTHONPATH=build/python:packaging /usr/bin/python3 -m unittest discover -s python/tests"""
import os
import tempfile
import threading
import unittest

import numpy as np

import models
import nxrt
import nxrt.conformance

BUILD = os.environ.get("NXRT_BUILD_DIR", "")


class NxrtPythonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.bc = os.path.join(cls.tmp.name, "broadcast.onnx")
        cls.bc_ref = models.broadcast_model(cls.bc)["out"]
        cls.mlp = os.path.join(cls.tmp.name, "mlp.onnx")
        cls.mlp_ref = models.mlp_model(cls.mlp)["out"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def feeds(self):
        return {"X": models.pattern(0, (2, 3)), "Y": models.pattern(1, (3,)), "Z": models.pattern(2, (1,))}

    def test_run_matches_reference(self):
        s = nxrt.InferenceSession(self.bc, providers=["CPUExecutionProvider"])
        (out,) = s.run(None, self.feeds())
        self.assertEqual(out.dtype, np.float32)
        np.testing.assert_allclose(out, self.bc_ref, rtol=1e-6, atol=1e-6)
        self.assertEqual(s.get_providers(), ["cpu"])
        self.assertTrue(all(ep == "cpu" for _, _, ep, _, _ in s.get_placement()))

    def test_kernel_descriptions(self):
        s = nxrt.InferenceSession(self.mlp, providers=["CPUExecutionProvider"])
        kernels = dict(s.get_kernels())
        self.assertEqual(set(kernels), {n for n, _, _, _, _ in s.get_placement()})
        self.assertIn("gemm ", kernels["mm1"])  # the cpu EP names the GEMM micro-kernel it chose
        self.assertTrue(kernels["mm1"].endswith(", B prepacked"), kernels)

    def test_string_tensors(self):
        # words [N] -> StringNormalizer(UPPER, stop "the") -> upper; numbers [N] (text) -> Cast float -> x
        from onnx import TensorProto, helper
        nodes = [helper.make_node("StringNormalizer", ["words"], ["upper"], case_change_action="UPPER", stopwords=["the"]),
                 helper.make_node("Cast", ["numbers"], ["x"], to=TensorProto.FLOAT)]
        g = helper.make_graph(nodes, "strings",
                              [helper.make_tensor_value_info("words", TensorProto.STRING, ["N"]),
                               helper.make_tensor_value_info("numbers", TensorProto.STRING, [3])],
                              [helper.make_tensor_value_info("upper", TensorProto.STRING, ["M"]),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])])
        path = os.path.join(self.tmp.name, "strings.onnx")
        models._save(g, path)
        s = nxrt.InferenceSession(path, providers=["CPUExecutionProvider"])
        upper, x = s.run(None, {"words": np.array(["the", "Été", "zèbre"]), "numbers": [b"1.5", "-2", " 3e2 "]})
        self.assertEqual(upper.dtype, object)
        self.assertEqual(upper.tolist(), ["ÉTÉ", "ZÈBRE"])
        np.testing.assert_array_equal(x, np.array([1.5, -2, 300], dtype=np.float32))

    def test_run_options_go_to_the_named_ep(self):
        s = nxrt.InferenceSession(self.bc, providers=["CPUExecutionProvider"])
        (out,) = s.run(None, self.feeds(), run_options={"cpu.tag": "x"})
        np.testing.assert_allclose(out, self.bc_ref, rtol=1e-6, atol=1e-6)
        with self.assertRaisesRegex(nxrt.Error, "nosuch"):
            s.run(None, self.feeds(), run_options={"nosuch.key": "1"})

    def test_cache_dir_miss_then_hit_same_outputs(self):
        with tempfile.TemporaryDirectory() as cache:
            first = nxrt.InferenceSession(self.mlp, providers=["cpu"], cache_dir=cache)
            self.assertEqual(first.get_load_report()["cache"]["mode"], "miss")
            second = nxrt.InferenceSession(self.mlp, providers=["cpu"], cache_dir=cache)
            report = second.get_load_report()
            self.assertEqual(report["cache"]["mode"], "hit")
            self.assertIn("compile", report["stages"])
            x = models.pattern(0, (1, 2, 4))
            np.testing.assert_array_equal(first.run(None, {"X": x})[0], second.run(None, {"X": x})[0])

    def test_dynamic_shape_and_output_names(self):
        s = nxrt.InferenceSession(self.mlp, providers=["cpu"])
        x = np.tile(models.pattern(0, (1, 2, 4)), (1, 3, 1))  # N = 6
        (out,) = s.run(["out"], {"X": x})
        self.assertEqual(out.shape, (1, 6, 3))
        np.testing.assert_allclose(out[:, :2], self.mlp_ref, rtol=1e-5, atol=1e-5)

    def test_io_metadata(self):
        s = nxrt.InferenceSession(self.bc, providers=["cpu"])
        ins = {i.name: i for i in s.get_inputs()}
        self.assertEqual(list(ins), ["X", "Y", "Z"])
        self.assertEqual(ins["X"].shape, [None, 3])
        self.assertEqual(ins["X"].type, "tensor(float)")
        self.assertEqual([o.name for o in s.get_outputs()], ["out"])

    def test_outputs_are_zero_copy_views_that_outlive_the_session(self):
        s = nxrt.InferenceSession(self.bc, providers=["cpu"])
        (out,) = s.run(None, self.feeds())
        self.assertFalse(out.flags.owndata)  # a view of nxrt's buffer
        self.assertFalse(out.flags.writeable)
        del s
        np.testing.assert_allclose(out, self.bc_ref, rtol=1e-6, atol=1e-6)

    def test_inputs_are_converted_when_needed(self):
        s = nxrt.InferenceSession(self.bc, providers=["cpu"])
        f = self.feeds()
        f["X"] = np.asfortranarray(f["X"].astype(np.float64))  # wrong type and layout: converted once
        (out,) = s.run(None, f)
        np.testing.assert_allclose(out, self.bc_ref, rtol=1e-6, atol=1e-6)

    def test_concurrent_runs(self):
        s = nxrt.InferenceSession(self.bc, providers=["cpu"])
        errors = []

        def work():
            try:
                for _ in range(20):
                    np.testing.assert_allclose(s.run(None, self.feeds())[0], self.bc_ref, rtol=1e-6, atol=1e-6)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_providers_and_plugins(self):
        self.assertIn("cpu", nxrt.get_available_providers())
        cpu = [p for p in nxrt.get_plugins() if p["name"] == "cpu"][0]
        self.assertTrue(cpu["loaded"])
        self.assertTrue(cpu["devices"])
        self.assertTrue(any(ep == "cpu" for ep, _, _ in nxrt.get_devices()))

    def test_errors_are_clear(self):
        with self.assertRaisesRegex(nxrt.Error, "nosuchep"):
            nxrt.InferenceSession(self.bc, providers=["nosuchep"])
        with self.assertRaises(nxrt.Error):
            nxrt.InferenceSession(os.path.join(self.tmp.name, "missing.onnx"), providers=["cpu"])
        s = nxrt.InferenceSession(self.bc, providers=["cpu"])
        with self.assertRaisesRegex(nxrt.Error, "no input 'nope'"):
            s.run(None, {"nope": np.zeros(3, np.float32)})
        with self.assertRaisesRegex(nxrt.Error, "no output 'nope'"):
            s.run(["nope"], self.feeds())
        with self.assertRaises(nxrt.Error):
            s.run(None, {"X": models.pattern(0, (2, 4)), "Y": models.pattern(1, (3,)), "Z": models.pattern(2, (1,))})
        with self.assertRaisesRegex(TypeError, "model path"):
            nxrt.InferenceSession(b"not a path", providers=["cpu"])
        import pathlib
        self.assertEqual(len(nxrt.InferenceSession(pathlib.Path(self.bc), providers=["cpu"]).get_inputs()), 3)
        with self.assertRaisesRegex(ValueError, "one dict per provider"):
            nxrt.InferenceSession(self.bc, providers=["cpu"], provider_options=[{}, {}])
        with self.assertRaises(nxrt.Error):  # an option the CPU plugin's schema does not have
            nxrt.InferenceSession(self.bc, providers=["cpu"], provider_options=[{"no_such_option": 1}])

    def test_register_plugin_and_conformance(self):
        sample = os.path.join(BUILD, "lib", "libnxrt_ep_sample.so")
        if not os.path.exists(sample):
            self.skipTest("no build tree sample plugin (NXRT_BUILD_DIR)")
        try:
            self.assertEqual(nxrt.register_plugin(sample), "sample")
        except nxrt.Error as e:  # found by discovery already (NXRT_PLUGIN_PATH): registered twice
            self.assertIn("already registered", str(e))
        s = nxrt.InferenceSession(self.bc, providers=["sample", "cpu"])
        placement = {op: ep for _, op, ep, _, _ in s.get_placement()}
        self.assertEqual(placement["Relu"], "sample")  # sample takes float Relu; Add needs equal shapes
        np.testing.assert_allclose(s.run(None, self.feeds())[0], self.bc_ref, rtol=1e-6, atol=1e-6)
        r = nxrt.conformance.certify(sample, suites=["abi"], jobs=2, timeout=20)
        self.assertTrue(r["passed"], r["failures"] or r["output"][-2000:])
        self.assertGreater(r["report"]["summary"]["passed"], 50)
        broken = os.path.join(BUILD, "lib", "conformance", "libnxrt_ep_broken_wrong_results.so")
        if os.path.exists(broken):
            r = nxrt.conformance.certify(broken, suites=["abi"], jobs=2, timeout=20)
            self.assertFalse(r["passed"])
            self.assertIn("abi/kernel.add_relu", [c for c, _ in r["failures"]])


if __name__ == "__main__":
    unittest.main()
