"""transformers' side of the runner's oracles (capture, steering): hidden states, decoder-layer outputs
through forward hooks, and a control vector added to the residual stream by a hook."""
from __future__ import annotations

import numpy as np
import torch
import transformers


def nmse(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.mean((a - b) ** 2) / np.mean(b ** 2))


def transformers_states(path, ids, steer: dict[int, np.ndarray] | None = None):
    """(hidden_states [n_layer + 1 arrays], per-layer decoder outputs via forward hooks, the model). steer:
    {layer: vector} added to that decoder layer's output by a forward hook (the oracle of steering)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    hooked: dict[int, np.ndarray] = {}

    def hook(i):
        def f(_mod, _args, out):
            hs = out[0] if isinstance(out, tuple) else out
            if steer and i in steer:
                hs = hs + torch.from_numpy(steer[i])
                out = (hs,) + tuple(out[1:]) if isinstance(out, tuple) else hs
            hooked[i] = hs[0].detach().numpy().copy()
            return out
        return f

    for i, layer in enumerate(model.model.layers):
        layer.register_forward_hook(hook(i))
    with torch.no_grad():
        res = model(torch.tensor([ids]), output_hidden_states=True)
    return [h[0].numpy() for h in res.hidden_states], hooked, model, res.logits[0].numpy()
