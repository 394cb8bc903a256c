#!/usr/bin/env python3
"""boldcast's golden-case generator, and a checker of existing cases.

PyTorch, with Hugging Face transformers' own `MambaMixer` (Mamba-1) and `Mamba2Mixer`
(Mamba-2) as the temporal mixers, so the reference values do not come from code written to
match the Rust backends. The model and the training step are those of `spec/MODEL.md`; the
file format is that of `golden/README.md` ("Files of a case").

    python golden/generate.py golden --config golden/configs/tiny.json --out golden/cases/tiny
    python golden/generate.py check --case golden/cases/tiny          # recompute, compare
    python golden/generate.py diff golden/cases/tiny /some/other/tiny  # tensor-by-tensor

Runs offline on the CPU: nothing is downloaded (the Hugging Face hub is switched off before
transformers is imported, and the kernel-less PyTorch paths of the mixers are used).
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# PyTorch's vectorized CPU kernels (the uniform and normal draws among them) depend on the
# instruction set; pinning AVX2 gives the same bytes on AVX2 and AVX-512 x86 machines.
os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from torch import nn  # noqa: E402
from transformers import Mamba2Config, MambaConfig  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402
from transformers.models.mamba.modeling_mamba import MambaMixer  # noqa: E402
from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer  # noqa: E402

# ----------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------

REQUIRED = ("batch", "tokens", "parcels", "d_in", "d_model", "n_layers", "d_state", "expand",
            "d_conv", "horizons", "lr", "weight_decay", "schedule", "steps")
OPTIONAL = {"name": None, "seed": None, "rho": None, "temporal": "mamba", "headdim": None,
            "chunk_size": 64, "k_neighbors": 0, "optimizer": "adamw", "betas": [0.9, 0.999],
            "grad_clip_norm": None, "warmup_steps": None, "max_steps": None, "min_lr": 0.0,
            "offset": False}
EPS_ADAM = 1e-8
EPS_NORM = 1e-5

# Tolerances of MODEL.md, `abs + rel * |expected|`, as src/golden.rs applies them.
TOL_FORWARD = (1e-4, 1e-3)
TOL_OPTIMIZER = (1e-6, 1e-5)


def read_config(path):
    """The case configuration, with the defaults of golden/README.md filled in. An unknown or
    a missing key is an error naming it (the Rust loader rejects unknown keys too)."""
    with open(path) as f:
        raw = json.load(f)
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
    missing = [k for k in REQUIRED if k not in raw]
    if unknown or missing:
        sys.exit(f"{path}: unknown keys {unknown}, missing keys {missing}")
    if raw["schedule"] not in ("constant", "cosine"):
        sys.exit(f"{path}: schedule {raw['schedule']!r} is neither 'constant' nor 'cosine'")
    if raw["schedule"] == "cosine" and ("warmup_steps" not in raw or "max_steps" not in raw):
        sys.exit(f"{path}: schedule 'cosine' needs warmup_steps and max_steps")
    if raw.get("optimizer", "adamw") not in ("adamw", "adam_l2"):
        sys.exit(f"{path}: optimizer {raw['optimizer']!r} is neither 'adamw' nor 'adam_l2'")
    if raw.get("temporal", "mamba") == "mamba2" and "headdim" not in raw:
        sys.exit(f"{path}: temporal 'mamba2' needs headdim")
    if not isinstance(raw.get("offset", False), bool):
        sys.exit(f"{path}: offset {raw['offset']!r} is neither true nor false")
    cfg = dict(OPTIONAL)
    cfg.update(raw)
    return raw, cfg


# ----------------------------------------------------------------------------------------
# Model (spec/MODEL.md, "Model"); module and parameter names are the checkpoint names
# ----------------------------------------------------------------------------------------

def hf_mixer(cfg):
    """The transformers mixer for one temporal block, configured as MODEL.md's mixer: no
    projection biases, a conv bias, SiLU, dt_rank = ceil(d_model / 16) (Mamba-1), one group
    and no dt clamp (Mamba-2)."""
    m = cfg["d_model"]
    if cfg["temporal"] == "mamba":
        hf = MambaConfig(hidden_size=m, state_size=cfg["d_state"], expand=cfg["expand"],
                         conv_kernel=cfg["d_conv"], time_step_rank=math.ceil(m / 16),
                         use_bias=False, use_conv_bias=True, hidden_act="silu",
                         num_hidden_layers=1)
        return MambaMixer(hf, layer_idx=0)
    if cfg["temporal"] != "mamba2":
        sys.exit(f"temporal {cfg['temporal']!r} is neither 'mamba' nor 'mamba2'")
    inner = cfg["expand"] * m
    hf = Mamba2Config(hidden_size=m, state_size=cfg["d_state"], expand=cfg["expand"],
                      head_dim=cfg["headdim"], num_heads=inner // cfg["headdim"], n_groups=1,
                      conv_kernel=cfg["d_conv"], chunk_size=cfg["chunk_size"],
                      use_bias=False, use_conv_bias=True, layer_norm_epsilon=EPS_NORM,
                      time_step_limit=(0.0, float("inf")), hidden_act="silu",
                      num_hidden_layers=1)
    return Mamba2Mixer(hf, layer_idx=0)


class TemporalBlock(nn.Module):
    """`x + mixer(LayerNorm(x))`, the mixer scanning time for each (window, parcel) alone."""

    def __init__(self, cfg):
        super().__init__()
        self.norm = nn.LayerNorm(cfg["d_model"], eps=EPS_NORM)
        self.mamba = hf_mixer(cfg)

    def forward(self, x):
        b, t, p, m = x.shape
        seqs = self.norm(x).transpose(1, 2).reshape(b * p, t, m)
        mixed = self.mamba(seqs).reshape(b, p, t, m).transpose(1, 2)
        return x + mixed


class NeighbourAttention(nn.Module):
    """One-head attention of each parcel over the k parcels of its adjacency row (itself
    first), at every time step; returns the update, the caller adds the residual."""

    def __init__(self, cfg, adjacency):
        super().__init__()
        m = cfg["d_model"]
        self.norm = nn.LayerNorm(m, eps=EPS_NORM)
        self.q = nn.Linear(m, m)
        self.kproj = nn.Linear(m, m)
        self.v = nn.Linear(m, m)
        self.out = nn.Linear(m, m)
        self.register_buffer("adjacency", adjacency, persistent=False)

    def forward(self, x):
        h = self.norm(x)
        q, keys, vals = self.q(h), self.kproj(h), self.v(h)
        nb_keys = keys[:, :, self.adjacency]          # (B, T, P, k, M)
        nb_vals = vals[:, :, self.adjacency]
        scores = torch.einsum("btpm,btpjm->btpj", q, nb_keys) / math.sqrt(x.shape[-1])
        weights = torch.softmax(scores, dim=-1)
        return self.out(torch.einsum("btpj,btpjm->btpm", weights, nb_vals))


class Layer(nn.Module):
    def __init__(self, cfg, adjacency):
        super().__init__()
        self.mamba = TemporalBlock(cfg)
        self.knn = NeighbourAttention(cfg, adjacency) if adjacency is not None else None

    def forward(self, x):
        x = self.mamba(x)
        if self.knn is not None:
            x = x + self.knn(x)
        return x


class Forecaster(nn.Module):
    """tokens (B,T,P,D) -> embed_proj -> n_layers x Layer -> final_norm (= the embedding)
    -> head, reshaped to (B,T,P,H,D)."""

    def __init__(self, cfg, adjacency):
        super().__init__()
        self.n_horizons = len(cfg["horizons"])
        self.embed_proj = nn.Linear(cfg["d_in"], cfg["d_model"])
        self.layers = nn.ModuleList(Layer(cfg, adjacency) for _ in range(cfg["n_layers"]))
        self.final_norm = nn.LayerNorm(cfg["d_model"], eps=EPS_NORM)
        self.head = nn.Linear(cfg["d_model"], self.n_horizons * cfg["d_in"])

    def embed(self, tokens):
        x = self.embed_proj(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.final_norm(x)

    def forward(self, tokens):
        b, t, p, d = tokens.shape
        return self.head(self.embed(tokens)).reshape(b, t, p, self.n_horizons, d)


def ring_adjacency(parcels, k):
    """Row p: p itself, then p+1, p-1, p+2, p-2, ... (mod P) until k entries; i64."""
    rows = []
    for p in range(parcels):
        row, step = [p], 1
        while len(row) < k:
            for q in (p + step, p - step):
                if len(row) < k:
                    row.append(q % parcels)
            step += 1
        rows.append(row)
    return torch.tensor(rows, dtype=torch.int64)


# ----------------------------------------------------------------------------------------
# Drawing a case from its seed (golden/README.md, "How a case is drawn")
# ----------------------------------------------------------------------------------------

def draw_model(cfg):
    """A model whose weights come from `torch.manual_seed(seed)`: PyTorch's and
    transformers' own initialization in module-construction order, then every LayerNorm's
    weight ~ U(0.8, 1.2) and bias ~ U(-0.1, 0.1) and every Mamba-2 gated-norm weight
    ~ U(0.8, 1.2), in module order, so that the norm parameters' gradients are not those of
    the trivial affine map."""
    torch.manual_seed(cfg["seed"])
    k = cfg["k_neighbors"]
    model = Forecaster(cfg, ring_adjacency(cfg["parcels"], k) if k > 0 else None)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.8, 1.2)
                module.bias.uniform_(-0.1, 0.1)
            elif isinstance(module, Mamba2Mixer):
                module.norm.weight.uniform_(0.8, 1.2)
    return model


def draw_inputs(cfg):
    """The tokens and, with `offset: true`, the forecast offset (else None), both from one
    generator seeded with `seed + 1`, the offset drawn after the tokens, so the tokens do not
    depend on the key."""
    gen = torch.Generator().manual_seed(cfg["seed"] + 1)
    tokens = draw_tokens(cfg, gen)
    return tokens, draw_offset(cfg, gen) if cfg["offset"] else None


def draw_offset(cfg, gen):
    """A fixed additive forecast `(B, T, P, H, D)`, N(0, 0.5^2) f32: the stand-in for the
    linear path's forecasts, which the model's own are added to."""
    b, t, p, d = cfg["batch"], cfg["tokens"], cfg["parcels"], cfg["d_in"]
    return torch.randn(b, t, p, len(cfg["horizons"]), d, generator=gen) * 0.5


def draw_tokens(cfg, gen):
    """AR(1) series of unit stationary variance per (window, parcel), `T * D` TRs long, from
    `gen` (seeded with `seed + 1`); TR `t * D + j` becomes `tokens[b, t, p, j]`."""
    b, t, p, d, rho = cfg["batch"], cfg["tokens"], cfg["parcels"], cfg["d_in"], cfg["rho"]
    n = t * d
    start = torch.randn(b, p, generator=gen)
    shocks = torch.randn(b, p, n, generator=gen) * math.sqrt(1.0 - rho * rho)
    series = torch.empty(b, p, n)
    series[:, :, 0] = start
    for i in range(1, n):
        series[:, :, i] = rho * series[:, :, i - 1] + shocks[:, :, i]
    return series.reshape(b, p, t, d).transpose(1, 2).contiguous()


# ----------------------------------------------------------------------------------------
# Loss, optimizer, schedule (spec/MODEL.md)
# ----------------------------------------------------------------------------------------

def targets(tokens, horizons):
    valid = tokens.shape[1] - max(horizons)
    if valid < 1:
        sys.exit(f"T = {tokens.shape[1]} leaves no valid step for horizons {horizons}")
    return torch.stack([tokens[:, h:h + valid] for h in horizons], dim=3)


def mse(pred, target):
    return ((pred[:, :target.shape[1]] - target) ** 2).mean()


def decays(name, tensor):
    return tensor.dim() >= 2 and not name.endswith("A_log")


def make_adam(named_params, cfg):
    """torch.optim.AdamW (decoupled decay) or torch.optim.Adam (coupled L2), decay on the
    tensors of two or more dimensions except A_log."""
    groups = [{"params": [p for n, p in named_params if decays(n, p)], "weight_decay": cfg["weight_decay"]},
              {"params": [p for n, p in named_params if not decays(n, p)], "weight_decay": 0.0}]
    cls = torch.optim.AdamW if cfg["optimizer"] == "adamw" else torch.optim.Adam
    return cls(groups, lr=cfg["lr"], betas=tuple(cfg["betas"]), eps=EPS_ADAM)


def lr_at(step, cfg):
    """The learning rate of the update of 0-based step `step`."""
    lr = cfg["lr"]
    if cfg["schedule"] == "constant":
        return lr
    warm, total, floor = cfg["warmup_steps"], cfg["max_steps"], cfg["min_lr"]
    if step < warm:
        return lr * (1.0 / warm + (1.0 - 1.0 / warm) * step / warm)
    progress = min(1.0, (step - warm) / max(1, total - warm))
    return floor + (lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def clip_scale(norm, cfg):
    max_norm = cfg["grad_clip_norm"]
    return 1.0 if max_norm is None else min(1.0, max_norm / (norm + 1e-6))


def fixed_gradient_updates(cfg, weights, grads):
    """`opt.*`: `steps` updates of the initial weights, in f64, each with the same gradient
    `grad.*` scaled once by the clip factor of its global norm (computed in f64)."""
    params = {n: nn.Parameter(w.double().clone()) for n, w in weights.items()}
    g64 = {n: grads[n].double() for n in weights}
    norm = math.sqrt(sum(float((g * g).sum()) for g in g64.values()))
    scale = clip_scale(norm, cfg)
    opt = make_adam(list(params.items()), cfg)
    for step in range(cfg["steps"]):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        for n, p in params.items():
            p.grad = g64[n] * scale
        opt.step()
    out = {f"opt.{n}": p.detach().float().contiguous() for n, p in params.items()}
    out["opt.grad_norm"] = torch.tensor([norm], dtype=torch.float64)
    return out


def compute_expected(cfg, model, tokens, offset=None, opt_grads=None):
    """Every tensor of expected.safetensors, from `model` (left trained by `steps` real
    steps) and the batch `tokens`; with an `offset`, the forecasts (`pred`, the loss, the
    gradients, the training steps) are `model(tokens) + offset`. `opt.*` applies `opt_grads`
    (by parameter name) when given, else the gradient just computed."""
    model.eval()  # the mixers' kernel-less paths; nothing in the model depends on the mode
    named = list(model.named_parameters())
    weights = {n: p.detach().clone() for n, p in named}
    target = targets(tokens, cfg["horizons"])

    def forecast():
        pred = model(tokens)
        return pred if offset is None else pred + offset

    with torch.no_grad():
        embed = model.embed(tokens)
    model.zero_grad(set_to_none=True)
    pred = forecast()
    loss = mse(pred, target)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in named}

    out = {"pred": pred.detach(), "embed": embed, "target": target, "loss": loss.detach().reshape(1)}
    out.update({f"grad.{n}": g for n, g in grads.items()})
    out.update(fixed_gradient_updates(cfg, weights, grads if opt_grads is None else opt_grads))

    opt = make_adam(named, cfg)
    losses, lrs, norms = [], [], []
    for step in range(cfg["steps"]):
        lr = lr_at(step, cfg)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        step_loss = mse(forecast(), target)
        if not math.isfinite(step_loss.item()):
            sys.exit(f"non-finite loss at step {step}")
        step_loss.backward()
        norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(p.grad) for _, p in named])).item()
        scale = clip_scale(norm, cfg)
        if scale < 1.0:
            for _, p in named:
                p.grad.mul_(scale)
        opt.step()
        losses.append(step_loss.item())
        lrs.append(lr)
        norms.append(norm)
    out["train.loss"] = torch.tensor(losses, dtype=torch.float64)
    out["train.lr"] = torch.tensor(lrs, dtype=torch.float64)
    out["train.grad_norm"] = torch.tensor(norms, dtype=torch.float64)
    return {n: t.contiguous() for n, t in out.items()}


# ----------------------------------------------------------------------------------------
# Modes
# ----------------------------------------------------------------------------------------

def load_tensors(path):
    with safe_open(path, framework="pt") as f:
        return {n: f.get_tensor(n) for n in f.keys()}


def write_case(config_path, out):
    raw, cfg = read_config(config_path)
    for key in ("seed", "rho"):
        if cfg[key] is None:
            sys.exit(f"{config_path}: key `{key}` is needed to draw a case")
    model = draw_model(cfg)
    tokens, offset = draw_inputs(cfg)
    weights = {n: p.detach().clone().contiguous() for n, p in model.named_parameters()}
    inputs = {"tokens": tokens}
    if cfg["k_neighbors"] > 0:
        inputs["adjacency"] = ring_adjacency(cfg["parcels"], cfg["k_neighbors"])
    if offset is not None:
        inputs["offset"] = offset
    expected = compute_expected(cfg, model, tokens, offset)
    meta = {"config": json.dumps(raw)}
    os.makedirs(out, exist_ok=True)
    save_file(weights, os.path.join(out, "weights.safetensors"), metadata=meta)
    save_file(inputs, os.path.join(out, "inputs.safetensors"), metadata=meta)
    save_file(expected, os.path.join(out, "expected.safetensors"), metadata=meta)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(raw, f, indent=2)
    n_params = sum(w.numel() for w in weights.values())
    print(f"{out}: loss {expected['loss'].item():.6f}, {n_params} parameters, "
          f"{len(expected)} expected tensors")


def tolerance_of(name):
    return TOL_OPTIMIZER if name.startswith("opt.") else TOL_FORWARD


def group_of(name):
    if name.startswith("train."):
        return name
    return name.split(".", 1)[0]


def compare(name, got, want):
    """(max |a-b|, max |a-b|/|b| over b != 0, worst |a-b| / tol(b)), in f64."""
    a, b = got.double().flatten(), want.double().flatten()
    diff = (a - b).abs()
    if diff.numel() == 0:
        return 0.0, 0.0, 0.0
    abs_tol, rel_tol = tolerance_of(name)
    nz = b != 0
    rel = (diff[nz] / b[nz].abs()).max().item() if nz.any() else 0.0
    ratio = (diff / (abs_tol + rel_tol * b.abs())).max().item()
    return diff.max().item(), rel, ratio


def check_case(case_dir, as_json=False, from_seed=False):
    """Recomputes every tensor of `case_dir/expected.safetensors` from the case's own weights
    and tokens, and compares: per group, the max abs and rel difference and the worst ratio
    to MODEL.md's tolerance (<= 1 passes). With `from_seed`, also redraws the weights and the
    tokens from the seed and says whether they equal the stored ones bit for bit."""
    raw, cfg = read_config(os.path.join(case_dir, "config.json"))
    weights = load_tensors(os.path.join(case_dir, "weights.safetensors"))
    inputs = load_tensors(os.path.join(case_dir, "inputs.safetensors"))
    expected = load_tensors(os.path.join(case_dir, "expected.safetensors"))
    problems = []

    k = cfg["k_neighbors"]
    adjacency = inputs["adjacency"] if k > 0 else None
    if k > 0 and not torch.equal(adjacency, ring_adjacency(cfg["parcels"], k)):
        problems.append("adjacency is not the ring table (the stored one is used)")
    model = Forecaster(cfg, adjacency)
    model.load_state_dict(weights, strict=True)  # names and shapes must be exactly these
    tokens = inputs["tokens"]
    offset = inputs.get("offset")
    if cfg["offset"] != (offset is not None):
        problems.append(f"config.json says offset {cfg['offset']}, inputs.safetensors "
                        f"{'holds' if offset is not None else 'lacks'} `offset`")
        offset = None
    # `opt.*` is a function of the initial weights and of the stored gradient `grad.*` (as
    # src/golden.rs checks it): Adam's m / sqrt(v) turns an f32 rounding difference in a
    # near-zero gradient entry into a full-size step difference, so the optimizer check must
    # not run on this run's own gradient.
    stored_grads = {n[len("grad."):]: t for n, t in expected.items() if n.startswith("grad.")}
    if set(stored_grads) != set(weights):
        problems.append("the grad.* names are not the parameter names")
        stored_grads = None
    got = compute_expected(cfg, model, tokens, offset, stored_grads)

    if set(got) != set(expected):
        problems.append(f"names: missing {sorted(set(got) - set(expected))}, "
                        f"extra {sorted(set(expected) - set(got))}")
    groups = {}
    for name in sorted(set(got) & set(expected)):
        g, w = got[name], expected[name]
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"{name}: {tuple(w.shape)} {w.dtype} stored, {tuple(g.shape)} {g.dtype} computed")
            continue
        d_abs, d_rel, ratio = compare(name, g, w)
        row = groups.setdefault(group_of(name), {"tensors": 0, "max_abs": 0.0, "max_rel": 0.0,
                                                  "worst_ratio": 0.0, "worst": name})
        row["tensors"] += 1
        row["max_abs"] = max(row["max_abs"], d_abs)
        row["max_rel"] = max(row["max_rel"], d_rel)
        if ratio > row["worst_ratio"] or math.isnan(ratio):
            row["worst_ratio"], row["worst"] = ratio, name
    failed = [g for g, r in groups.items() if not r["worst_ratio"] <= 1.0]

    seed_report = None
    if from_seed:
        model_s, (tokens_s, offset_s) = draw_model(cfg), draw_inputs(cfg)
        w_same = all(torch.equal(p.detach(), weights[n]) for n, p in model_s.named_parameters())
        seed_report = {"weights_bitwise_equal": w_same, "tokens_bitwise_equal": torch.equal(tokens_s, tokens)}
        if offset_s is not None:
            seed_report["offset_bitwise_equal"] = offset is not None and torch.equal(offset_s, offset)
        if not all(seed_report.values()):
            problems.append(f"from the seed: {seed_report}")

    ok = not failed and not problems
    name = cfg["name"] or os.path.basename(os.path.normpath(case_dir))
    if as_json:
        print(json.dumps({"case": name, "dir": case_dir, "pass": ok, "groups": groups,
                          "from_seed": seed_report, "problems": problems}))
    else:
        print(f"case `{name}` ({case_dir}): {'PASS' if ok else 'FAIL'}")
        print(f"  {'group':<16} {'tensors':>7} {'max abs diff':>13} {'max rel diff':>13} "
              f"{'worst ratio':>12}  worst tensor")
        for g, r in groups.items():
            mark = "" if r["worst_ratio"] <= 1.0 else "  <-- FAIL"
            print(f"  {g:<16} {r['tensors']:>7} {r['max_abs']:>13.3e} {r['max_rel']:>13.3e} "
                  f"{r['worst_ratio']:>12.3e}  {r['worst']}{mark}")
        if seed_report is not None:
            print(f"  redrawn from seed {cfg['seed']}: weights bit for bit "
                  f"{'equal' if seed_report['weights_bitwise_equal'] else 'DIFFERENT'}, tokens "
                  f"{'equal' if seed_report['tokens_bitwise_equal'] else 'DIFFERENT'}"
                  + ("" if "offset_bitwise_equal" not in seed_report else
                     f", offset {'equal' if seed_report['offset_bitwise_equal'] else 'DIFFERENT'}"))
        for p in problems:
            print(f"  problem: {p}")
    return ok


def diff_cases(a_dir, b_dir):
    """Tensor-by-tensor comparison of two case directories (b is the reference)."""
    same = True
    for fname in ("weights", "inputs", "expected"):
        a = load_tensors(os.path.join(a_dir, f"{fname}.safetensors"))
        b = load_tensors(os.path.join(b_dir, f"{fname}.safetensors"))
        if set(a) != set(b):
            print(f"{fname}: names differ: only in {a_dir}: {sorted(set(a) - set(b))}, "
                  f"only in {b_dir}: {sorted(set(b) - set(a))}")
            same = False
        n_equal, worst, worst_ratio = 0, (0.0, None), (0.0, None)
        for n in sorted(set(a) & set(b)):
            if a[n].shape != b[n].shape or a[n].dtype != b[n].dtype:
                print(f"{fname}: {n}: {tuple(a[n].shape)} {a[n].dtype} vs {tuple(b[n].shape)} {b[n].dtype}")
                same = False
                continue
            if torch.equal(a[n], b[n]):
                n_equal += 1
                continue
            same = False
            d_abs, _, ratio = compare(n, a[n], b[n])
            if d_abs > worst[0]:
                worst = (d_abs, n)
            if ratio > worst_ratio[0]:
                worst_ratio = (ratio, n)
        line = f"{fname}: {n_equal} of {len(set(a) & set(b))} tensors bit for bit equal"
        if worst[1]:
            line += f"; largest difference {worst[0]:.3e} in {worst[1]}"
        if fname == "expected" and worst_ratio[1]:
            line += f"; worst ratio to MODEL.md's tolerance {worst_ratio[0]:.3e} in {worst_ratio[1]}"
        print(line)
    with open(os.path.join(a_dir, "config.json")) as fa, open(os.path.join(b_dir, "config.json")) as fb:
        if json.load(fa) != json.load(fb):
            print("config.json: the configurations differ")
            same = False
    print("identical" if same else "different")
    return same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    g = sub.add_parser("golden", help="draw a case from a config and write its directory")
    g.add_argument("--config", required=True)
    g.add_argument("--out", required=True)
    c = sub.add_parser("check", help="recompute a case's expected tensors and compare")
    c.add_argument("--case", required=True, nargs="+", help="one or more case directories")
    c.add_argument("--from-seed", action="store_true",
                   help="also redraw weights and tokens from the seed and compare bit for bit")
    c.add_argument("--json", action="store_true", help="one JSON line per case")
    d = sub.add_parser("diff", help="compare two case directories tensor by tensor")
    d.add_argument("a")
    d.add_argument("b")
    a = ap.parse_args()
    hf_logging.set_verbosity_error()  # not the notes that the CUDA kernels are not installed
    torch.set_num_threads(1)  # reductions in one fixed order: reruns give the same bytes
    if a.mode == "golden":
        write_case(a.config, a.out)
    elif a.mode == "check":
        results = [check_case(case, a.json, a.from_seed) for case in a.case]
        sys.exit(0 if all(results) else 1)
    else:
        sys.exit(0 if diff_cases(a.a, a.b) else 1)


if __name__ == "__main__":
    main()
