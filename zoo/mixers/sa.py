"""Softmax multi-head self-attention, the baseline mixer.

Dosovitskiy et al., "An Image is Worth 16x16 Words" (ICLR 2021), https://arxiv.org/abs/2010.11929
Touvron et al., "Training data-efficient image transformers" (DeiT, ICML 2021), https://arxiv.org/abs/2012.12877

Parameter names follow timm's ``vision_transformer.Attention`` (``qkv``, ``proj``) so DeiT / timm weights map
one to one.
"""
import torch.nn as nn
import torch.nn.functional as F

from ..layers.linear import onednn_linear, onednn_ready


class SelfAttention(nn.Module):
    """softmax(Q K^T / sqrt(d)) V with h heads of width d = C / h, computed by ``scaled_dot_product_attention``.

    Args:
        dim: Channel width C.
        num_heads: Number of heads h (must divide C).
        num_tokens: Unused (any N works); accepted for the common mixer signature.
        qkv_bias: Bias on the fused q|k|v projection.
        attn_drop: Dropout on attention weights (training only).
        proj_drop: Dropout after the output projection.
    """

    code = 'sa'
    paper = 'Dosovitskiy et al., An Image is Worth 16x16 Words (ICLR 2021); Touvron et al., DeiT (ICML 2021)'
    arxiv = '2010.11929'
    summary = 'softmax self-attention (the ViT / DeiT baseline): every token attends to every token, O(N^2)'
    citation = """@inproceedings{dosovitskiy2021vit,
  title     = {An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale},
  author    = {Dosovitskiy, Alexey and Beyer, Lucas and Kolesnikov, Alexander and Weissenborn, Dirk and
               Zhai, Xiaohua and Unterthiner, Thomas and Dehghani, Mostafa and Minderer, Matthias and
               Heigold, Georg and Gelly, Sylvain and Uszkoreit, Jakob and Houlsby, Neil},
  booktitle = {International Conference on Learning Representations},
  year      = {2021}
}"""

    def __init__(self, dim, num_heads=8, num_tokens=None, qkv_bias=True, attn_drop=0.0, proj_drop=0.0):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"sa: dim={dim} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x):
        B, N, C = x.shape
        fast = onednn_ready(x, self.qkv, self.proj)  # CPU inference: oneDNN's linear (zoo.layers.linear)
        qkv = onednn_linear(x, self.qkv.weight, self.qkv.bias) if fast else self.qkv(x)
        qkv = qkv.reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, h, N, d)
        x = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop if self.training else 0.0)
        x = x.transpose(1, 2).reshape(B, N, C)  # (B, N, C)
        return self.proj_drop(onednn_linear(x, self.proj.weight, self.proj.bias) if fast else self.proj(x))
