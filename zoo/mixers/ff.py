"""Feed-forward token mixing: an MLP over the patch (token) axis.

Melas-Kyriazi, "Do You Even Need Attention? A Stack of Feed-Forward Layers Does Surprisingly Well on ImageNet"
(2021), https://arxiv.org/abs/2105.02723

The token LayerNorm (normalised shape (N,)) belongs to the mixer, so a block using it has no channel pre-norm
before the mixer; the official block runs the channel MLP first, then this one (see ``zoo.backbones.vit.Block``).
The token count N is fixed at construction.
"""
import torch.nn as nn

from ..layers.linear import onednn_linear, onednn_ready


class FeedForwardMixer(nn.Module):
    """LayerNorm over tokens, Linear(N, rN), GELU, Linear(rN, N), applied to every channel.

    Args:
        dim: Channel width C (unused by the weights, kept for the common signature).
        num_heads: Unused.
        num_tokens: N, required: the weights are shaped by it.
        mlp_ratio: r, the hidden expansion of the token MLP (4 in the paper).
        eps: LayerNorm epsilon (1e-6 as the DeiT-style trunk).
        drop: Dropout after each linear layer.
    """

    code = 'ff'
    paper = 'Melas-Kyriazi, Do You Even Need Attention? A Stack of Feed-Forward Layers Does Surprisingly Well on ImageNet (2021)'
    arxiv = '2105.02723'
    summary = 'a feed-forward layer over the token axis (LayerNorm over tokens, N -> 4N -> N MLP): no attention at all, for a fixed number of tokens'
    citation = """@article{melaskyriazi2021doyoueven,
  title   = {Do You Even Need Attention? A Stack of Feed-Forward Layers Does Surprisingly Well on ImageNet},
  author  = {Melas-Kyriazi, Luke},
  journal = {arXiv preprint arXiv:2105.02723},
  year    = {2021}
}"""

    # The block reads these: the mixer brings its own norm and runs after the channel MLP; the trunk refuses
    # input sizes that change N.
    has_norm = True
    mixer_first = False
    fixed_tokens = True

    def __init__(self, dim, num_heads=None, num_tokens=None, mlp_ratio=4.0, eps=1e-6, drop=0.0):
        super().__init__()
        if not num_tokens:
            raise ValueError("ff: the feed-forward mixer needs num_tokens (its weights are shaped by the token count)")
        self.num_tokens = num_tokens
        hidden = int(num_tokens * mlp_ratio)
        self.norm = nn.LayerNorm(num_tokens, eps=eps)
        self.fc1 = nn.Linear(num_tokens, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, num_tokens)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        if x.shape[1] != self.num_tokens:
            raise ValueError(
                f"ff: this model was built for {self.num_tokens} tokens but got {x.shape[1]}; the feed-forward "
                f"mixer has a fixed token count, so feed inputs of the size it was built for (or build the model "
                f"for this size, e.g. zoo.load(..., img_size=...))")
        x = self.norm(x.transpose(1, 2))  # (B, C, N)
        if onednn_ready(x, self.fc1, self.act, self.fc2) and self.act.approximate == "none":  # CPU inference
            x = onednn_linear(self.drop(onednn_linear(x, self.fc1.weight, self.fc1.bias, gelu=True)),
                              self.fc2.weight, self.fc2.bias)
        else:
            x = self.fc2(self.drop(self.act(self.fc1(x))))
        return self.drop(x).transpose(1, 2)  # (B, N, C)
