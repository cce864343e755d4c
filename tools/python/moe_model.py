# SPDX-License-Identifier: MIT
"""A small decoder in the OLMoE/Mixtral architecture, for decoding through
moecache: RMSNorm, causal self-attention with rotary embeddings and a KV
cache, and in every layer a mixture of SwiGLU experts behind a top-k
softmax router.

Weights come from a seeded generator (the same seed gives the same bits on
any machine) and are written as a safetensors checkpoint with Mixtral's
tensor names, which ``moecachectl load`` reads. The routed experts are
served by an ``ExpertSource``: ``MemoryExperts`` (every expert in memory,
the reference) or ``ProviderExperts`` (moecache.torch.ExpertProvider: the
bank, and the host pages for cold experts). Both run the same code on
tensors holding the same bits, in the same order, so their logits are
equal bit for bit on the CPU.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Config:
    vocab: int = 256
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 96  # per expert
    n_layers: int = 4
    n_experts: int = 32
    top_k: int = 4
    max_seq: int = 128
    rope_theta: float = 10000.0
    eps: float = 1e-5
    seed: int = 1234

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Config":
        return cls(**json.loads(text))


EXPERT_TENSORS = ("w1", "w3", "w2")  # gate, up, down (Mixtral's names)


def expert_shapes(cfg: Config) -> Dict[str, Tuple[int, int]]:
    return {"w1": (cfg.d_ff, cfg.d_model), "w3": (cfg.d_ff, cfg.d_model),
            "w2": (cfg.d_model, cfg.d_ff)}


def expert_name(layer: int, expert: int, w: str) -> str:
    return f"model.layers.{layer}.block_sparse_moe.experts.{expert}.{w}.weight"


def _randn(gen: torch.Generator, shape, scale: float) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float32) * scale


def generate(cfg: Config) -> Dict[str, torch.Tensor]:
    """Every weight of the model, a function of cfg (and its seed) only.
    Each tensor has its own generator seeded from (seed, name), so that the
    order of generation does not matter."""
    out: Dict[str, torch.Tensor] = {}

    def make(name: str, shape, scale: float) -> None:
        gen = torch.Generator().manual_seed(
            (cfg.seed * 1000003 + sum(ord(c) * 131 ** i for i, c in enumerate(name))) % 2 ** 62)
        out[name] = _randn(gen, shape, scale).contiguous()

    d, ff = cfg.d_model, cfg.d_ff
    make("model.embed_tokens.weight", (cfg.vocab, d), 1.0)
    for layer in range(cfg.n_layers):
        p = f"model.layers.{layer}."
        out[p + "input_layernorm.weight"] = torch.ones(d)
        out[p + "post_attention_layernorm.weight"] = torch.ones(d)
        for w in ("q_proj", "k_proj", "v_proj", "o_proj"):
            make(p + f"self_attn.{w}.weight", (d, d), 1.0 / math.sqrt(d))
        make(p + "block_sparse_moe.gate.weight", (cfg.n_experts, d), 1.0 / math.sqrt(d))
        for e in range(cfg.n_experts):
            for w, shape in expert_shapes(cfg).items():
                make(expert_name(layer, e, w), shape, 1.0 / math.sqrt(shape[1]))
    out["model.norm.weight"] = torch.ones(d)
    make("lm_head.weight", (cfg.vocab, d), 1.0 / math.sqrt(d))
    return out


# ---- safetensors ------------------------------------------------------------

def write_safetensors(path: str, tensors: Dict[str, torch.Tensor],
                      metadata: Optional[Dict[str, str]] = None) -> None:
    """A .safetensors file (F32 only): an 8-byte little-endian header length,
    the JSON header, then the tensors' bytes back to back."""
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for name, t in tensors.items():
        assert t.dtype == torch.float32 and t.is_contiguous()
        n = t.numel() * 4
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t in tensors.values():
            f.write(t.numpy().tobytes())


def read_safetensors(path: str, skip_experts: bool = True) -> Tuple[Dict[str, torch.Tensor],
                                                                     Dict[str, str]]:
    """The F32 tensors of a .safetensors file (without the routed experts:
    those are moecache's) and its metadata."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        meta = header.pop("__metadata__", {})
        out = {}
        for name, h in header.items():
            if skip_experts and ".experts." in name:
                continue
            if h["dtype"] != "F32":
                raise ValueError(f"{path}: tensor '{name}' is {h['dtype']}, not F32")
            b, e = h["data_offsets"]
            f.seek(base + b)
            out[name] = torch.frombuffer(bytearray(f.read(e - b)),
                                         dtype=torch.float32).view(h["shape"])
    return out, meta


# ---- expert sources --------------------------------------------------------

class ExpertSource:
    """Where the routed experts' weights come from, layer by layer."""

    def begin_layer(self, layer: int, topk_ids: torch.Tensor) -> None:
        raise NotImplementedError

    def weights(self, layer: int, expert: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(gate [d_ff, d], up [d_ff, d], down [d, d_ff]) of an expert the
        last begin_layer named."""
        raise NotImplementedError

    def end_step(self) -> None:
        pass


class MemoryExperts(ExpertSource):
    """Every expert in memory: the reference."""

    def __init__(self, weights: Dict[str, torch.Tensor]):
        self.w = weights

    def begin_layer(self, layer: int, topk_ids: torch.Tensor) -> None:
        pass

    def weights(self, layer, expert):
        return tuple(self.w[expert_name(layer, expert, w)] for w in EXPERT_TENSORS)


class ProviderExperts(ExpertSource):
    """The experts through moecache: each pinned expert from the bank it
    sits in (prepare()'s bank_maps), and with wait=False the cold experts
    from the host pages."""

    def __init__(self, provider, wait: bool = True, hint_next: bool = False):
        self.p = provider
        self.wait = wait
        self.hint = hint_next
        self.expert_map: Optional[torch.Tensor] = None
        self.from_bank = 0
        self.from_host = 0
        names = {t.name for t in provider.table}
        missing = [f"{w}.weight" for w in EXPERT_TENSORS if f"{w}.weight" not in names]
        if missing:
            raise ValueError(f"the pool's table has no {', '.join(missing)}")

    def begin_layer(self, layer, topk_ids):
        self.expert_map = self.p.prepare(layer, topk_ids, wait=self.wait)
        if self.hint and layer + 1 < self.p.n_layers:
            # A cheap guess: the same experts one layer down.
            self.p.hint_next(layer + 1, topk_ids)

    def weights(self, layer, expert):
        # On the bank the expert sits in (of several, or the one).
        t = self.p.expert_tensors(expert)
        if t is not None:
            self.from_bank += 1
            return t["w1.weight"], t["w3.weight"], t["w2.weight"]
        if self.wait:
            raise RuntimeError(f"expert {expert} of layer {layer} is not pinned after a wait")
        self.from_host += 1
        h = self.p.host_expert(layer, expert)
        return h["w1.weight"], h["w3.weight"], h["w2.weight"]

    def end_step(self):
        self.p.release()


# ---- the model --------------------------------------------------------------

def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class Model:
    """Greedy decoding with a KV cache; dense weights are the model's own,
    routed experts come from an ExpertSource."""

    def __init__(self, cfg: Config, dense: Dict[str, torch.Tensor], experts: ExpertSource):
        self.cfg = cfg
        self.w = dense
        self.experts = experts
        hd = cfg.head_dim
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        ang = torch.outer(torch.arange(cfg.max_seq, dtype=torch.float32), inv)
        self.cos, self.sin = ang.cos(), ang.sin()
        self.reset()

    def reset(self) -> None:
        cfg = self.cfg
        self.k_cache = torch.zeros(cfg.n_layers, cfg.n_heads, cfg.max_seq, cfg.head_dim)
        self.v_cache = torch.zeros_like(self.k_cache)
        self.pos = 0
        self.routes: List[torch.Tensor] = []

    def _rope(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        # x [n_heads, head_dim]: rotate pairs (even, odd).
        cos, sin = self.cos[pos], self.sin[pos]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)

    def _attention(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        cfg, p = self.cfg, f"model.layers.{layer}.self_attn."
        pos = self.pos
        q = F.linear(x, self.w[p + "q_proj.weight"]).view(cfg.n_heads, cfg.head_dim)
        k = F.linear(x, self.w[p + "k_proj.weight"]).view(cfg.n_heads, cfg.head_dim)
        v = F.linear(x, self.w[p + "v_proj.weight"]).view(cfg.n_heads, cfg.head_dim)
        q, k = self._rope(q, pos), self._rope(k, pos)
        self.k_cache[layer, :, pos] = k
        self.v_cache[layer, :, pos] = v
        keys = self.k_cache[layer, :, : pos + 1]
        vals = self.v_cache[layer, :, : pos + 1]
        scores = torch.einsum("hd,htd->ht", q, keys) / math.sqrt(cfg.head_dim)
        att = torch.einsum("ht,htd->hd", torch.softmax(scores, -1), vals)
        return F.linear(att.reshape(cfg.d_model), self.w[p + "o_proj.weight"])

    def _moe(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        logits = F.linear(x, self.w[f"model.layers.{layer}.block_sparse_moe.gate.weight"])
        probs = torch.softmax(logits, -1)
        weights, ids = torch.topk(probs, cfg.top_k)
        weights = weights / weights.sum()
        self.routes.append(ids)
        self.experts.begin_layer(layer, ids.view(1, -1))
        out = torch.zeros_like(x)
        # One expert at a time, in ascending id: the same order whatever
        # serves the weights.
        order = torch.argsort(ids)
        for j in order.tolist():
            gate, up, down = self.experts.weights(layer, int(ids[j]))
            h = F.silu(F.linear(x, gate)) * F.linear(x, up)
            out = out + weights[j] * F.linear(h, down)
        return out

    @torch.no_grad()
    def step(self, token: int) -> torch.Tensor:
        """Feeds one token; returns the logits [vocab] for the next one."""
        cfg = self.cfg
        if self.pos >= cfg.max_seq:
            raise ValueError(f"sequence longer than max_seq {cfg.max_seq}")
        x = self.w["model.embed_tokens.weight"][token]
        for layer in range(cfg.n_layers):
            p = f"model.layers.{layer}."
            x = x + self._attention(layer, rms_norm(x, self.w[p + "input_layernorm.weight"],
                                                    cfg.eps))
            x = x + self._moe(layer, rms_norm(x, self.w[p + "post_attention_layernorm.weight"],
                                              cfg.eps))
        self.experts.end_step()
        self.pos += 1
        x = rms_norm(x, self.w["model.norm.weight"], cfg.eps)
        return F.linear(x, self.w["lm_head.weight"])


def prompt_tokens(cfg: Config, seed: int, length: int) -> List[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab, (length,), generator=gen).tolist()


def dense_weights(weights: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    return {k: v for k, v in weights.items() if ".experts." not in k}
