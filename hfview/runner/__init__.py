"""hfview.runner: run a checkpoint through llama.cpp straight from the view.

``runner.load(model, precision="auto", device="cpu", n_ctx=None) -> Runner`` (see runner.api);
``runner.llama(model, **llama_kwargs) -> llama_cpp.Llama`` over the view (see runner.llama_object);
imported lazily so that ``import hfview.runner.resolve`` does not pull llama.cpp in.
"""
__all__ = ["load", "Runner", "llama"]


def __getattr__(name):
    if name == "llama":
        from .llama_object import llama
        return llama
    if name in __all__:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'hfview.runner' has no attribute {name!r}")
