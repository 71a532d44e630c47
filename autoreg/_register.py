"""``register_tensors``: make the plain tensor attributes of an existing module tree buffers.

For an instance of a class that cannot be edited (a third-party model): the tensors the audit
(``find_unregistered``) finds in plain attributes are registered through ``register_buffer``, so
that ``.to()`` moves them and global buffer-registration hooks see them, with the mixin's rules
(``_facts.why_no_buffer_slot``) for which names can hold a buffer.
"""

from __future__ import annotations

import torch
from torch import nn

from ._audit import check_module, join
from ._audit_scope import candidates, carried_by_autoreg
from ._facts import why_no_buffer_slot

__all__ = ["register_tensors"]


def register_tensors(module: nn.Module, *, persistent: bool = False) -> list[str]:
    """Turn the plain tensor attributes of an existing module tree into buffers, in place.

    For an instance of a class you cannot edit (a third-party model): every module in the tree
    that keeps a tensor in a plain attribute gets it registered through ``register_buffer``, so
    that ``.to()`` moves it and global buffer-registration hooks see it. The rules are autoreg's:
    tensors that require grad (weights meant as parameters, autograd results), complex tensors
    (``.to(a real dtype)`` casts a buffer and drops its imaginary part, where nn.Module never
    touches a plain attribute: move it where it is used), ``nn.Parameter``s,
    names defined on the class (a property, a class-level default), nn.Module's internal
    attributes, names an autoreg module already owns or declares ``autoreg.Plain``, and the
    tensors that ``prune`` / ``weight_norm`` / ``spectral_norm`` recompute each forward are left
    as they are.

    Buffers are non-persistent by default, so ``state_dict()`` keys do not change;
    ``persistent=True`` adds them to it. Tensors inside list, tuple and dict attributes cannot be
    buffers and are left as they are (``find_unregistered`` still reports them: use
    ``autoreg.BufferList`` / ``autoreg.BufferDict`` in code you can edit). After registration the
    names follow nn.Module's rules for buffers: assigning another tensor updates the buffer,
    assigning a non-tensor other than None raises ``TypeError``.

    Call it right after construction: runtime state the model has stored since (a cache from a
    forward pass) would become buffers too. Returns the dotted paths it registered.
    """
    check_module(module, "register_tensors")
    registered: list[str] = []
    for prefix, sub in module.named_modules():
        for name, value in candidates(sub):
            if (
                not isinstance(value, torch.Tensor)
                or isinstance(value, nn.Parameter)
                or value.requires_grad
                or value.is_complex()  # a buffer's .to(a real dtype) would drop its imaginary part
                or carried_by_autoreg(sub, name, value)
                or why_no_buffer_slot(type(sub), name) is not None
            ):
                continue
            # register_buffer refuses a name that is already a plain attribute.
            del sub.__dict__[name]
            try:
                sub.register_buffer(name, value, persistent)
            except BaseException:
                sub.__dict__[name] = value
                raise
            registered.append(join(prefix, name))
    return registered
