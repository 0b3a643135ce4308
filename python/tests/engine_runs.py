"""The runs of the independent numpy engines (numpy_engines.py): which engine computes which
scheme under which profile, and one batched `posenc verify` + `posenc diagnose` per run.

    PYTHONPATH=python POSENC_BIN=build/posenc python3 python/tests/engine_runs.py   # a table

prints every (case, engine, profile, verify status, worst ratio, diagnose verdict)."""
import concurrent.futures
import functools
import os
import sys
import tempfile

import posenc
import numpy_engines as ne

# engine -> (profile, {scheme: function(case) -> outputs})
ENGINES = {
    "hf32": ("fp32", {"rope": ne.rope_hf, "rope_scaling": ne.rope_hf, "alibi": ne.alibi_hf,
                      "sinusoidal": ne.sinusoid_outputs,
                      "attention": lambda c: ne.attention_outputs(c, "f32"),
                      "nope": lambda c: ne.attention_outputs(c, "f32"),
                      "mrope": ne.mrope_hf, "plan": ne.plan_hf, "mla": ne.mla_hf}),
    # A float32 sinusoid that writes base ** (-2i/d) (a faithful powf of the negated exponent)
    "hf32-negpow": ("fp32", {"sinusoidal": lambda c: _paper_only(c, "negpow")}),
    "ggml": ("fp32-recurrence", {"rope": ne.rope_ggml, "rope_scaling": ne.rope_ggml,
                                 "alibi": ne.alibi_ggml}),
    "bloom": ("fp32", {"alibi": ne.alibi_bloom}),
    # llama.cpp on a dynamic-NTK case: the caller passes the adjusted base as freq_base
    "ggml-dynamic": ("fp32-recurrence", {"rope_scaling": lambda c: _dynamic_only(c)}),
    # llama.cpp's 16-bit KV cache: scores from the f16/bf16-stored q and k
    "ggml-kv16": ("fp32-recurrence", {"rope": lambda c: ne.rope_ggml(c, kv16=True),
                                      "rope_scaling": lambda c: ne.rope_ggml(c, kv16=True)}),
    "eager-bf16": ("bf16", {"rope": lambda c: ne.rope_hf(c, "bf16"),
                            "rope_scaling": lambda c: ne.rope_hf(c, "bf16"),
                            "alibi": lambda c: ne.alibi_hf(c, "bf16"),
                            "sinusoidal": lambda c: ne.sinusoid_outputs(c, "bf16"),
                            "attention": lambda c: ne.attention_outputs(c, ne._attn_dt(c, "bf16")),
                            "nope": lambda c: ne.attention_outputs(c, ne._attn_dt(c, "bf16"))}),
    "eager-f16": ("f16", {"rope": lambda c: ne.rope_hf(c, "f16"),
                          "rope_scaling": lambda c: ne.rope_hf(c, "f16"),
                          "alibi": lambda c: ne.alibi_hf(c, "f16"),
                          "attention": lambda c: ne.attention_outputs(c, ne._attn_dt(c, "f16")),
                          "nope": lambda c: ne.attention_outputs(c, ne._attn_dt(c, "f16"))}),
}

# The schemes no engine here models, with the reason (reported as skips).
NOT_MODELLED = {
    "learned": "a table gather (same budget under every profile); no engine arithmetic to model",
    "t5_bias": "bucket tables and bias gathers: exact in every pipeline, not engine-specific",
    "shaw": "relative-position embeddings: no HF/ggml float32 pipeline written here",
    "deberta": "disentangled attention: not written here",
    "transformer_xl": "relative shift + memory: not written here",
    "kv_cache": "multi-call traces (prefill, decode, shifts): not written here",
}


def _dynamic_only(case):
    if case.params["scaling"]["type"] != "dynamic":
        raise ne.Skip("engine ggml-dynamic runs the dynamic-NTK cases only (engine ggml: the rest)")
    return ne.rope_ggml(case, dynamic_base=True)


def _paper_only(case, how):
    if case.params.get("variant") != "paper":
        raise ne.Skip("the negpow form is the paper variant's inv_freq; concat uses exp")
    return ne.sinusoid_outputs(case, "f32", paper_inv=how)


def all_cases():
    return posenc.find_cases()


def outputs(engine, case):
    """The engine's outputs for `case`, or a Skip reason (str)."""
    fns = ENGINES[engine][1]
    if case.scheme not in fns:
        return NOT_MODELLED.get(case.scheme, f"the {engine} engine does not model {case.scheme}")
    try:
        return fns[case.scheme](case)
    except ne.Skip as e:
        return str(e)


def _verify_each(done, out_dir, profile, binary):
    """{case id: CaseResult or 'ERROR: ...'}: one batched verify; when posenc exits 2 (a case
    the profile does not apply to), each case on its own so that one does not hide the rest."""
    try:
        v = posenc.verify(done, out_dir, profile=profile, posenc=binary)
        return {c.id: v.case(c.id) for c in done}
    except posenc.PosencError:
        res = {}
        for c in done:
            try:
                res[c.id] = posenc.verify(c, out_dir, profile=profile, posenc=binary).case(c.id)
            except posenc.PosencError as e:
                res[c.id] = "ERROR: " + str(e).splitlines()[0]
        return res


def _diagnose(cases, out_dir, profile, binary):
    if not cases:
        return {}
    try:
        return {x["id"]: x for x in posenc.diagnose(cases, out_dir, profile=profile, posenc=binary)}
    except posenc.PosencError:
        return {}


@functools.lru_cache(maxsize=None)
def run(engine, binary):
    """{case id: Run, or the reason (str) the engine skips the case}."""
    profile = ENGINES[engine][0]
    out_dir = tempfile.mkdtemp(prefix=f"numpy_{engine}_")
    done, result = [], {}
    for case in all_cases():
        o = outputs(engine, case)
        if isinstance(o, str):
            result[case.id] = o
            continue
        case.write_outputs(out_dir, o)
        done.append(case)
    verdicts = _verify_each(done, out_dir, profile, binary)
    # negative controls are not diagnosed (diagnose exits 2 on them alone)
    diag = _diagnose([c for c in done if c.result != "invalid"], out_dir, profile, binary)
    for c in done:
        result[c.id] = Run(engine, profile, c, verdicts[c.id], diag.get(c.id))
    return result


def run_all(binary, engines=None):
    """run() for every engine, two at a time (diagnose dominates: a few seconds per case)."""
    engines = list(engines or ENGINES)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        return dict(zip(engines, ex.map(lambda e: run(e, binary), engines)))


class Run:
    """One engine's verdict on one case: status, worst ratio and its tensor, diagnose's
    verdict and summary (None for a negative control)."""

    def __init__(self, engine, profile, case, verdict, diag):
        self.engine, self.profile, self.case = engine, profile, case
        if isinstance(verdict, str):
            self.status, self.message, self.worst, self.tensor = "ERROR", verdict, float("nan"), ""
        else:
            self.status, self.message = verdict.status, verdict.get("message", "")
            judged = [t for t in verdict.tensors if isinstance(t.ratio, (int, float))]
            worst = max(judged, key=lambda t: t.ratio) if judged else None
            self.worst = worst.ratio if worst else float("nan")
            self.tensor = worst.name if worst else ""
        self.verdict = diag.get("verdict") if diag else None
        self.summary = diag.get("summary", "") if diag else ""

    def describe(self):
        return (f"{self.case.id}: engine {self.engine}, profile {self.profile}: verify {self.status}"
                f" worst {self.worst:.3g} ({self.tensor}) {self.message}; diagnose {self.verdict}: "
                f"{self.summary}")


def main():
    binary = posenc.find_binary()
    for engine, runs in run_all(binary, sys.argv[1:] or None).items():
        for r in runs.values():
            if isinstance(r, str):
                continue
            ok = r.status == "PASS" and r.verdict in ("correct", None)
            print(f"{engine:12s} {r.profile:16s} {r.case.id:70s} {r.status:5s} {r.worst:9.3g} "
                  f"{r.tensor:18s} {r.verdict}{'' if ok else '  <<<'}")
            if not ok:
                print("      ", r.summary[:300] or r.message)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
