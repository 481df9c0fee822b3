"""Channel MLP and stochastic depth."""
import torch.nn as nn

from .linear import onednn_linear, onednn_ready


class Mlp(nn.Module):
    """Linear -> GELU (exact) -> Dropout -> Linear -> Dropout (timm names ``fc1``, ``fc2``)."""

    def __init__(self, in_features, hidden_features=None, out_features=None, drop=0.0):
        super().__init__()
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_features, out_features or in_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        if getattr(self.act, "approximate", None) == "none" and onednn_ready(x, self.fc1, self.act, self.fc2):
            x = onednn_linear(x, self.fc1.weight, self.fc1.bias, gelu=True)  # fc1 and GELU fused (CPU inference)
            return self.drop(onednn_linear(self.drop(x), self.fc2.weight, self.fc2.bias))
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class DropPath(nn.Module):
    """Stochastic depth: drop the whole residual branch per sample with probability ``p`` while training."""

    def __init__(self, p=0.0):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask / keep

    def extra_repr(self):
        return f"p={self.p}"
