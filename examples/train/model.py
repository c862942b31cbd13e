"""A small GPT in plain PyTorch for packed (THD) microbatches: no batch axis,
the documents of a microbatch one after another, causal attention inside
each document through variable-length attention over cu_seqlens.

    model = GPT(PRESETS["small"].model)
    loss = model.loss(tokens, rope_rows, labels, loss_mask, cu_seqlens, max_seqlen, scale)

`rope_rows` gives every row its row of the rotary table (its position in its
document): thdc's `rope_rows` output, or the framework's per-document
position ids. The loss is sum(cross_entropy * loss_mask) * scale, so a
global batch's microbatches add up to its per-token mean when scale is one
over its loss tokens.
"""
import inspect
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class ModelConfig:
    vocab: int
    dim: int
    layers: int
    heads: int
    rope_rows: int  # rows of the rotary table: the longest document (C)
    mlp_ratio: int = 4
    rope_base: float = 10000.0


@dataclass(frozen=True)
class Preset:
    model: ModelConfig
    C: int  # tokens per microbatch
    N: int  # sequences per microbatch, the dummy included
    documents: int  # documents per global batch
    lr: float


def preset(name, C=None, N=None, documents=None):
    """A preset's sizes, with C, N or the documents per global batch changed."""
    vocab, dim, layers, heads, C0, N0, documents0, lr = {
        "tiny": (512, 128, 4, 4, 256, 16, 8, 3e-3),  # about 1M parameters
        "small": (8192, 640, 8, 10, 8192, 64, 40, 1e-3),  # about 50M
        "medium": (32768, 1024, 24, 16, 8192, 64, 40, 3e-4),  # about 370M
    }[name]
    C, N = C or C0, N or N0
    return Preset(ModelConfig(vocab, dim, layers, heads, rope_rows=C), C, N,
                  documents or documents0, lr)


PRESET_NAMES = ("tiny", "small", "medium")


#
# Attention over cu_seqlens
#

def _flash_causal_keyword():
    """How this PyTorch release asks varlen_attn for causal attention:
    window_size=(-1, 0) in recent ones, is_causal=True before."""
    from torch.nn.attention.varlen import varlen_attn

    parameters = inspect.signature(varlen_attn).parameters
    return {"window_size": (-1, 0)} if "window_size" in parameters else {"is_causal": True}


_CAUSAL = None


def flash_varlen_attention(q, k, v, cu_seqlens, max_seqlen):
    """PyTorch's variable-length FlashAttention (CUDA, bf16/fp16)."""
    global _CAUSAL
    from torch.nn.attention.varlen import varlen_attn

    if _CAUSAL is None:
        _CAUSAL = _flash_causal_keyword()
    return varlen_attn(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, **_CAUSAL)


def reference_varlen_attention(q, k, v, cu_seqlens, max_seqlen=None):
    """The same attention on any device: scaled_dot_product_attention with a
    mask that lets row i see row j when both lie in one sequence of
    cu_seqlens and j <= i (rows past the last offset count as the last
    sequence's). Memory grows with rows squared: for CPU runs."""
    rows = torch.arange(q.shape[0], device=q.device, dtype=cu_seqlens.dtype)
    sequence = torch.searchsorted(cu_seqlens[1:].contiguous(), rows, right=True)
    mask = (sequence[:, None] == sequence[None, :]) & (rows[:, None] >= rows[None, :])
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1),
                                         v.transpose(0, 1), attn_mask=mask)
    return out.transpose(0, 1)


def varlen_causal_attention(q, k, v, cu_seqlens, max_seqlen):
    """Causal attention inside each sequence of cu_seqlens; q, k, v: [T, heads,
    head_dim]. FlashAttention on the GPU, the reference on the CPU."""
    if q.is_cuda:
        return flash_varlen_attention(q, k, v, cu_seqlens, max_seqlen)
    return reference_varlen_attention(q, k, v, cu_seqlens, max_seqlen)


#
# The model
#

def rotary_table(rows, head_dim, base):
    """cos and sin of the rotary angles, [rows, head_dim / 2] each (float32)."""
    inverse = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(rows, dtype=torch.float32), inverse)
    return torch.cos(angles), torch.sin(angles)


def apply_rotary(x, cos, sin):
    """Rotates pairs (x[..., :h], x[..., h:]) of x [T, heads, 2h] by the
    angles of each row (cos, sin: [T, h]), in float32."""
    x1, x2 = x.float().chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).type_as(x)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads, self.head_dim = config.heads, config.dim // config.heads
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.proj = nn.Linear(config.dim, config.dim, bias=False)

    def forward(self, x, cos, sin, cu_seqlens, max_seqlen):
        q, k, v = self.qkv(x).view(x.shape[0], 3, self.heads, self.head_dim).unbind(1)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = varlen_causal_attention(q, k, v.contiguous(), cu_seqlens, max_seqlen)
        return self.proj(out.reshape(x.shape[0], -1))


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(config.dim), nn.LayerNorm(config.dim)
        self.attention = Attention(config)
        self.mlp = nn.Sequential(nn.Linear(config.dim, config.mlp_ratio * config.dim),
                                 nn.GELU(approximate="tanh"),
                                 nn.Linear(config.mlp_ratio * config.dim, config.dim))

    def forward(self, x, cos, sin, cu_seqlens, max_seqlen):
        x = x + self.attention(self.norm1(x), cos, sin, cu_seqlens, max_seqlen)
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab, config.dim)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.vocab, bias=False)
        cos, sin = rotary_table(config.rope_rows, config.dim // config.heads, config.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)
        for block in self.blocks:  # GPT-2's scaling of the residual projections
            for layer in (block.attention.proj, block.mlp[2]):
                nn.init.normal_(layer.weight, std=0.02 / math.sqrt(2 * config.layers))

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def loss(self, tokens, rope_rows, labels, loss_mask, cu_seqlens, max_seqlen, scale):
        """sum(cross_entropy * loss_mask) * scale over the rows of one packed
        microbatch. tokens, rope_rows, labels, loss_mask: [T]; cu_seqlens:
        int32 offsets of the sequences (trailing repeats allowed);
        max_seqlen: an int bound on their lengths; scale: a float32 tensor
        [1] (a static buffer, so a captured graph reads each step's value)."""
        cos, sin = self.rope_cos[rope_rows], self.rope_sin[rope_rows]
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x, cos, sin, cu_seqlens, max_seqlen)
        return self.output_loss(x, labels, loss_mask, scale)

    def output_loss(self, x, labels, loss_mask, scale):
        """The final norm, the output layer and the loss of the last block's
        hidden states x [T, dim] (loss's second half, which the per-layer
        graphs of examples/train run eagerly)."""
        logits = self.head(self.norm(x)).float()
        losses = F.cross_entropy(logits, labels, reduction="none")
        return (losses * loss_mask).sum() * scale


def parameter_groups(model, weight_decay=0.1):
    """AdamW groups: weight decay on matrices, none on norms and biases."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": rest, "weight_decay": 0.0}]
