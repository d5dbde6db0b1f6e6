"""The bench scripts' result assembly (bench/collect.py, bench/shapes_attn.py,
bench/shapes.py, bench/ws_verify.py) on made-up inputs: what they write into
bench/results/*.json is what the notes and issues cite, so a row carried over
from the wrong run, a dropped error field or a wrong exit code must fail here
rather than in a device call. Standard library only (unittest)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(ROOT, "bench")
sys.path.insert(0, BENCH)

import ws_verify  # noqa: E402


def write(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)


def run(script, args, env=None):
    e = dict(os.environ)
    for k in ("KTUNE_COLLECT_KEEP", "KTUNE_SHAPES_KEEP"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([sys.executable, os.path.join(BENCH, script)] + args,
                          capture_output=True, text=True, env=e)


def summary(workload, us, verified=True, floor=None):
    return {"workload": workload, "device": "NVIDIA H200", "verified": verified, "us": us,
            "retime_us": us * 1.01, "floor_us": floor, "template": "blockattn_ws.cu",
            "params": "variant=ws,CONS=2,RING=1,RPROD=0", "rel_err": 0.002,
            "counts": {"space": 10, "planned": 10, "evaluated": 10},
            "statuses": {"ok": 10}, "worker_restarts": 0, "wall_s": 12.0}


class InTmp(unittest.TestCase):
    """A test with a temporary folder of its own (self.d; self.p(name))."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def p(self, name):
        return os.path.join(self.d, name)


class Collect(InTmp):
    def sweeps(self):
        paths = []
        for i, (wl, us, ok) in enumerate([("blockattn_bwd:ads_d128_L256_b128", 700.0, True),
                                          ("blockattn_bwd:ads_d128_L256", 380.0, True),
                                          ("blockattn_bwd_rope:ads_d128_L256", 420.0, True),
                                          ("blockattn_fwd:ads_d128_L256_b128", 260.0, False)]):
            write(self.p(f"s{i}.json"), summary(wl, us, ok))
            paths.append(self.p(f"s{i}.json"))
        return paths

    def peers(self):
        write(self.p("peers.json"), [
            {"workload": "blockattn_bwd:ads_d128_L256_b128", "impl": "fa2_varlen", "us": 1260.0,
             "dq_rel_err": 2.4e-3, "dk_rel_err": 2.3e-3, "dv_rel_err": 2.3e-3},
            {"workload": "blockattn_bwd:ads_d128_L256_b128", "impl": "ktune_dq_check",
             "dq_rel_err": 3.1e-3, "dk_rel_err": 3.0e-3, "dv_rel_err": 2.9e-3,
             "config": "variant=ws,CONS=2,RING=1,RPROD=0"},
            {"workload": "blockattn_bwd_rope:ads_d128_L256", "impl": "unfused_rope", "us": 600.0},
            {"workload": "blockattn_bwd_rope:ads_d128_L256", "impl": "rope_conj_only", "us": 50.0},
        ])
        return self.p("peers.json")

    def test_rows_errors_and_ratios(self):
        r = run("collect.py", [self.p("out.json"), "abc1234", self.peers()] + self.sweeps())
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.load(open(self.p("out.json")))
        by = {(x["workload"], x["impl"]): x for x in doc["rows"]}
        # the unverified forward gets no ktune row, and says so
        self.assertNotIn(("blockattn_fwd:ads_d128_L256_b128", "ktune"), by)
        self.assertIn("no verified winner", r.stderr)
        k = by[("blockattn_bwd:ads_d128_L256_b128", "ktune")]
        self.assertEqual((k["dq_rel_err"], k["dk_rel_err"], k["dv_rel_err"]), (3.1e-3, 3.0e-3, 2.9e-3))
        self.assertEqual(k["dq_rel_err_config"], "variant=ws,CONS=2,RING=1,RPROD=0")
        self.assertNotIn(("blockattn_bwd:ads_d128_L256_b128", "ktune_dq_check"), by)
        self.assertNotIn(("blockattn_bwd_rope:ads_d128_L256", "rope_conj_only"), by)
        rope = by[("blockattn_bwd_rope:ads_d128_L256", "ktune")]
        self.assertAlmostEqual(rope["vs_plain_bwd"], round(420.0 / 380.0, 4))
        self.assertAlmostEqual(rope["vs_unfused_rope"], round(420.0 / 600.0, 4))
        self.assertEqual(doc["commit"], "abc1234")
        self.assertNotIn("runs", doc)

    def test_below_floor_is_refused(self):
        write(self.p("s.json"), summary("dense:4096x4096:N1024", 10.0, floor=20.0))
        write(self.p("peers.json"), [])
        r = run("collect.py", [self.p("out.json"), "abc", self.p("peers.json"), self.p("s.json")])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("below 0.95 x the floor", r.stderr)
        self.assertFalse(os.path.exists(self.p("out.json")))

    def test_keep_carries_whole_workloads(self):
        old = {"device": "NVIDIA H200", "date": "2026-12-01T00:00:00Z", "commit": "old0001", "rows": [
            {"workload": "blockattn_bwd:ads_d128_L256_b128", "impl": "ktune", "us": 750.0},
            {"workload": "blockattn_bwd:ads_d128_L256_b128", "impl": "fa2_varlen", "us": 1300.0},
            {"workload": "dense:4096x4096:N1024", "impl": "ktune", "us": 45.0},
            {"workload": "dense:4096x4096:N1024", "impl": "cublas_dense", "us": 46.0,
             "run": {"commit": "older01", "date": "2026-11-01T00:00:00Z"}}]}
        write(self.p("old.json"), old)
        r = run("collect.py", [self.p("out.json"), "new0001", self.peers()] + self.sweeps(),
                {"KTUNE_COLLECT_KEEP": self.p("old.json")})
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.load(open(self.p("out.json")))
        by = {(x["workload"], x["impl"]): x for x in doc["rows"]}
        # measured now: the old rows of that workload are gone, peers and all
        self.assertEqual(by[("blockattn_bwd:ads_d128_L256_b128", "ktune")]["us"], 700.0)
        self.assertEqual(by[("blockattn_bwd:ads_d128_L256_b128", "fa2_varlen")]["us"], 1260.0)
        self.assertEqual(by[("blockattn_bwd:ads_d128_L256_b128", "ktune")]["run"]["commit"], "new0001")
        # not measured now: carried, marked with the run that measured it
        self.assertEqual(by[("dense:4096x4096:N1024", "ktune")]["run"]["commit"], "old0001")
        self.assertEqual(by[("dense:4096x4096:N1024", "cublas_dense")]["run"]["commit"], "older01")
        self.assertEqual([x["commit"] for x in doc["runs"]], ["new0001", "old0001", "older01"])


class ShapesAttn(InTmp):
    DEV = "NVIDIA H200"

    def cell(self, blk, hd, fwd_us, bwd_us, fa2=(1000.0, 3000.0)):
        for direction, us in (("fwd", fwd_us), ("bwd", bwd_us)):
            doc = ({"error": {"message": "no kernel takes this shape"}} if us is None else
                   {"us": us, "verified": True, "config": "variant=ws", "rel_err": 0.002,
                    "counts": {"evaluated": 8, "space": 8}, "statuses": {"ok": 8}, "stop": "space"})
            write(self.p(f"ktune_{direction}_b{blk}_d{hd}.json"), doc)
        write(self.p(f"fa2_b{blk}_d{hd}.json"), [
            {"impl": "fa2_varlen", "workload": f"blockattn_fwd:b{blk}", "us": fa2[0]},
            {"impl": "fa2_varlen", "workload": f"blockattn_bwd:b{blk}", "us": fa2[1],
             "dq_rel_err": 2.4e-3, "dk_rel_err": 2.3e-3, "dv_rel_err": 2.3e-3}])

    def run_cells(self, blocks, hds, env=None, device=DEV):
        return run("shapes_attn.py", [self.d, "new0001", "16", "40", device, blocks, hds], env)

    def old(self):
        rows = []
        for blk in (32, 64, 128, 256):
            for hd in (64, 128):
                for direction in ("fwd", "bwd"):
                    rows.append({"direction": direction, "block": blk, "head_dim": hd,
                                 "ktune_us": 999.0, "fa2_us": 1000.0, "verified": True})
        doc = {"device": self.DEV, "run": {"commit": "old0001", "date": "2026-12-01T00:00:00Z",
                                           "calls": "two calls"},
               "shape": {"seqs": 1152, "lmax": 1024, "heads": 4, "rope": 0},
               "budget": 16, "time_limit_s": 30, "rows": rows}
        write(self.p("old.json"), doc)
        return self.p("old.json")

    def test_speedup_errors_and_exit(self):
        self.cell(256, 64, 800.0, 3000.0, fa2=(1200.0, 3600.0))
        r = self.run_cells("256", "64")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = json.load(open(self.p("shapes_attn.json")))["rows"]
        self.assertEqual([(x["direction"], x["speedup"]) for x in rows], [("fwd", 1.5), ("bwd", 1.2)])
        self.assertEqual(rows[1]["fa2_dq_rel_err"], 2.4e-3)
        self.assertNotIn("fa2_dq_rel_err", rows[0])

    def test_unrun_or_refused_cell_fails(self):
        self.cell(256, 64, 800.0, None)
        r = self.run_cells("256", "64 128")
        self.assertEqual(r.returncode, 1)
        rows = json.load(open(self.p("shapes_attn.json")))["rows"]
        self.assertEqual(rows[1]["ktune_error"], "no kernel takes this shape")
        self.assertIn("not run", rows[2]["ktune_error"])
        self.assertIn("1 of 4 cells", r.stdout)

    def test_keep_carries_other_cells(self):
        self.cell(256, 64, 800.0, 3000.0)
        self.cell(256, 128, 1500.0, 5900.0)
        r = self.run_cells("256", "64 128", {"KTUNE_SHAPES_KEEP": self.old()})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        doc = json.load(open(self.p("shapes_attn.json")))
        self.assertEqual(len(doc["rows"]), 16)
        cells = [(x["direction"], x["block"], x["head_dim"]) for x in doc["rows"]]
        self.assertEqual(len(set(cells)), 16)
        self.assertEqual(cells[0], ("fwd", 32, 64))
        for x in doc["rows"]:
            want = "new0001" if x["block"] == 256 else "old0001"
            self.assertEqual(x["run"]["commit"], want, x)
        carried = [x for x in doc["rows"] if x["block"] != 256]
        self.assertTrue(all(x["ktune_us"] == 999.0 and x["run"]["time_limit_s"] == 30 for x in carried))
        self.assertEqual(carried[0]["run"]["calls"], "two calls")
        self.assertEqual([x["commit"] for x in doc["runs"]], ["new0001", "old0001"])
        self.assertEqual(len(doc["runs"][1]["cells"]), 12)
        self.assertIn("12 carried over", r.stdout)

    def test_keep_refuses_another_device(self):
        self.cell(256, 64, 800.0, 3000.0)
        old = self.old()
        r = self.run_cells("256", "64", {"KTUNE_SHAPES_KEEP": old}, device="NVIDIA H100 80GB HBM3")
        self.assertEqual(r.returncode, 2)
        self.assertIn("measured on NVIDIA H200", r.stderr)
        self.assertFalse(os.path.exists(self.p("shapes_attn.json")))
        write(old, {"rows": "nonsense"})
        r = self.run_cells("256", "64", {"KTUNE_SHAPES_KEEP": old})
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a shapes_attn.json", r.stderr)


class Shapes(InTmp):
    DEV = "NVIDIA H200"
    S1 = "tokens=1024,in=2048,out=2048,blocks=16,rank=256"
    S2 = "tokens=4096,in=2048,out=2048,blocks=16,rank=256"

    def sweep(self, shape, us, wrong=0, device=DEV):
        return {"family": "monarch", "shape": shape, "device": device, "verified": us is not None,
                "us": us or 0.0, "config": "variant=relayout_ws,PERSISTENT=3", "rel_err": 0.0025,
                "cublas_us": 17.0004, "floor_us": 2.7, "counts": {"space": 100, "evaluated": 6},
                "statuses": {"ok": 6 - wrong, "wrong": wrong}}

    def run_shapes(self, sweeps, env=None, variants=""):
        write(self.p("shapes_monarch.json"), {"sweeps": sweeps})
        return run("shapes.py", [self.d, "new0001", "5", variants], env)

    def old(self):
        rows = [{"family": f, "shape": s, "verified": True, "best_us": 99.0, "cublas_us": 50.0,
                 "statuses": {"ok": 5}, "gpu": None}
                for f in ("blast", "monarch") for s in (self.S1, self.S2)]
        write(self.p("old.json"), {"date": "2026-12-03T06:48:29Z", "commit": "old0001",
                                   "device": self.DEV, "budget_per_problem": 5, "rows": rows})
        return self.p("old.json")

    def test_rows_and_exit(self):
        r = self.run_shapes([self.sweep(self.S1, 29.4567), self.sweep(self.S2, 72.5)])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        doc = json.load(open(self.p("shapes.json")))
        self.assertEqual([x["best_us"] for x in doc["rows"]], [29.457, 72.5])
        self.assertEqual(doc["rows"][0]["cublas_us"], 17.0)
        self.assertEqual(doc["commit"], "new0001")
        self.assertNotIn("runs", doc)
        # a wrong candidate, or no verified config, fails the run
        r = self.run_shapes([self.sweep(self.S1, 29.4, wrong=1), self.sweep(self.S2, 72.5)])
        self.assertEqual(r.returncode, 1)
        r = self.run_shapes([self.sweep(self.S1, None)])
        self.assertEqual(r.returncode, 1)
        self.assertIsNone(json.load(open(self.p("shapes.json")))["rows"][0]["best_us"])

    def test_keep_carries_other_problems(self):
        r = self.run_shapes([self.sweep(self.S1, 29.4)], {"KTUNE_SHAPES_KEEP": self.old()})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        doc = json.load(open(self.p("shapes.json")))
        got = {(x["family"], x["shape"]): x for x in doc["rows"]}
        self.assertEqual(len(doc["rows"]), 4)
        self.assertEqual(got[("monarch", self.S1)]["best_us"], 29.4)
        self.assertEqual(got[("monarch", self.S1)]["run"]["commit"], "new0001")
        for k in (("monarch", self.S2), ("blast", self.S1), ("blast", self.S2)):
            self.assertEqual(got[k]["best_us"], 99.0)
            self.assertEqual(got[k]["run"], {"commit": "old0001", "date": "2026-12-03T06:48:29Z",
                                              "budget": 5})
        self.assertEqual([(x["commit"], x["problems"]) for x in doc["runs"]],
                         [("new0001", 1), ("old0001", 3)])
        self.assertIn("3 carried over", r.stdout)
        # carried again: a row keeps the run that measured it
        os.rename(self.p("shapes.json"), self.p("mid.json"))
        r = self.run_shapes([self.sweep(self.S2, 70.0)], {"KTUNE_SHAPES_KEEP": self.p("mid.json")})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        doc = json.load(open(self.p("shapes.json")))
        got = {(x["family"], x["shape"]): x["run"]["commit"] for x in doc["rows"]}
        self.assertEqual(got[("monarch", self.S1)], "new0001")
        self.assertEqual(got[("blast", self.S1)], "old0001")

    def test_cells_count_blast_or_monarch_against_cublas(self):
        S16 = "tokens=16,in=2048,out=2048,blocks=16,rank=256"
        blast = dict(self.sweep(self.S1, 15.5), family="blast", cublas_us=16.0)
        lowrank = dict(self.sweep(self.S2, 10.0), family="lowrank",
                       shape="tokens=4096,in=2048,out=2048,rank=256")
        write(self.p("shapes_blast.json"), {"sweeps": [blast]})
        write(self.p("shapes_lowrank.json"), {"sweeps": [lowrank]})
        # S1: blast 15.5 beside the cell's fastest cuBLAS (16.0, not monarch's
        # 17.0) is ahead; S2: monarch 72.5 > 17.0 behind, lowrank's 10.0 does
        # not count; N16 is not a cell
        r = self.run_shapes([self.sweep(self.S1, 29.4), self.sweep(self.S2, 72.5),
                             self.sweep(S16, 5.0)])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        doc = json.load(open(self.p("shapes.json")))
        self.assertEqual(doc["cells_ahead"], "1 of 2")
        c1, c2 = doc["cells"]
        self.assertEqual((c1["tokens"], c1["family"], c1["best_us"], c1["cublas_us"], c1["ahead"]),
                         (1024, "blast", 15.5, 16.0, True))
        self.assertEqual((c2["tokens"], c2["family"], c2["best_us"], c2["ahead"]),
                         (4096, "monarch", 72.5, False))
        self.assertIn("at or under cuBLAS in 1 of 2", r.stdout)
        # a cell whose structured rows did not verify is behind
        os.remove(self.p("shapes_blast.json"))
        r = self.run_shapes([self.sweep(self.S1, None)])
        doc = json.load(open(self.p("shapes.json")))
        self.assertEqual(doc["cells_ahead"], "0 of 1")
        self.assertIsNone(doc["cells"][0]["best_us"])

    def test_keep_refuses_another_device(self):
        old = self.old()
        r = self.run_shapes([self.sweep(self.S1, 29.4, device="NVIDIA H100 80GB HBM3")],
                            {"KTUNE_SHAPES_KEEP": old})
        self.assertEqual(r.returncode, 2)
        self.assertIn("measured on NVIDIA H200", r.stderr)
        self.assertFalse(os.path.exists(self.p("shapes.json")))
        write(old, {"rows": "nonsense"})
        r = self.run_shapes([self.sweep(self.S1, 29.4)], {"KTUNE_SHAPES_KEEP": old})
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a shapes.json", r.stderr)


class WsVerify(unittest.TestCase):
    def test_reads_the_suite_line(self):
        # the format of tests/test_blockattn.c's per-shape line of the ws suite
        src = open(os.path.join(ROOT, "tests", "test_blockattn.c")).read()
        self.assertIn('"\\n    %s %s: %d configs%s%s, worst rel %.2e (GPU ref) %.2e (CPU ref)"', src)
        log = ("Suite: blockattn_gpu\n"
               "    blockattn_fwd seqs=40,lmax=256,heads=4,block=128,rope=0,head_dim=128: 6 configs"
               " of ws, worst rel 2.10e-03 (GPU ref) 2.30e-03 (CPU ref)\n"
               "    blockattn_bwd seqs=40,lmax=256,heads=4,block=128,rope=1,head_dim=128: 3 configs"
               " of ws, worst rel 3.00e-03 (GPU ref) 3.10e-03 (CPU ref)\n")
        rows = ws_verify.rows(log)
        self.assertEqual(rows[0], ("blockattn_fwd", "seqs=40,lmax=256,heads=4,block=128,rope=0,head_dim=128",
                                   "6", "2.10e-03", "2.30e-03"))
        self.assertEqual(len(rows), 2)
        self.assertEqual(ws_verify.read("/nonexistent/log"), [])
        self.assertEqual(ws_verify.line(*rows[1]),
                         "  blockattn_bwd seqs=40,lmax=256,heads=4,block=128,rope=1,head_dim=128: "
                         "3 configs, worst rel 3.00e-03 (GPU ref) 3.10e-03 (CPU ref)")


if __name__ == "__main__":
    unittest.main()
