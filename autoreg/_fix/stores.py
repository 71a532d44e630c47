"""Every store of one attribute in a class's source, and what each stores, as far as the source
says: the whole-source half of the buffer style.

The factory ran one configuration: ``sites`` knows the stores that ran and what they stored. A
class's source also has the stores that did not run (the other branch of ``if logscale:``, a
method the factory never called). ``stores_of`` finds them all in the class's methods
(``self.x = v``, ``self.x: T = v``, ``setattr(self, "x", v)``, ``self.x += v``, ``del self.x``,
``self.x`` among several targets, and ``setattr(self, name, v)`` under a computed name);
``value_kind`` says what a value expression is when the source alone tells: a tensor (a ``torch``
factory, arithmetic on one, a tensor method of one, a local variable only ever bound to one),
``None``, an ``nn.Parameter``, a literal or a Python number (``t.item()``, ``float(x)``,
``math.sqrt(d)``) that is no tensor, or unknown.
``other_value`` finds, in a store that ran with a tensor, the value the source shows it may
store in another configuration (the ``0.0`` of ``t if use_bias else 0.0``, a parameter's float
default). ``construction_methods`` are the methods that run while the module
is built: ``__init__`` (and the other construction methods), every method they call through
``self``, and those that ran during construction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Final, Literal, TypeAlias

import libcst as cst
import libcst.matchers as m

from .source import Index, Statement, dotted, is_self_attribute, literal, self_name_of

__all__ = [
    "Store",
    "aliased_as",
    "construction_methods",
    "other_value",
    "passed_parameters",
    "spelled_dtype",
    "stored_names",
    "stores_of",
    "value_kind",
]

# What spells a tensor of another dtype than the default float one: a dtype, a method converting
# to one, a function making a complex tensor.
_OTHER_DTYPES: Final = frozenset(
    {"float64", "double", "float16", "half", "bfloat16", "complex64", "complex128", "cfloat"}
    | {"cdouble", "complex32", "chalf"}
)
_OTHER_DTYPE_METHODS: Final = frozenset({"double", "half", "bfloat16", "cfloat", "cdouble"})
_COMPLEX_FUNCTIONS: Final = frozenset({"polar", "view_as_complex", "complex"})
_COMPLEX: Final = (
    _COMPLEX_FUNCTIONS
    | {"complex64", "complex128", "cfloat", "cdouble"}
    | {
        "complex32",
        "chalf",
    }
)

# "computed": setattr(self, name, value) under a name the source does not spell (it may be this).
Form: TypeAlias = Literal["assign", "setattr", "computed", "augmented", "several", "delete"]
Kind: TypeAlias = Literal["tensor", "none", "parameter", "other"]
# What other_value finds: the value, and the parameter whose default it is.
_Other: TypeAlias = tuple[cst.BaseExpression, str | None] | None

CONSTRUCTION: Final = frozenset({"__init__", "__post_init__", "__attrs_post_init__"})

# torch functions that return one tensor (a tuple-returning one, such as torch.split, is not here).
TENSOR_FUNCTIONS: Final = frozenset(
    [
        "tensor",
        "as_tensor",
        "from_numpy",
        "zeros",
        "ones",
        "full",
        "empty",
        "zeros_like",
        "ones_like",
        "full_like",
        "empty_like",
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "randint_like",
        "randperm",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "tril",
        "triu",
        "cat",
        "concat",
        "stack",
        "hstack",
        "vstack",
        "outer",
        "polar",
        "complex",
        "exp",
        "exp2",
        "log",
        "log2",
        "log10",
        "sin",
        "cos",
        "tan",
        "sqrt",
        "rsqrt",
        "pow",
        "where",
        "clamp",
        "clip",
        "cumsum",
        "cumprod",
        "matmul",
        "mm",
        "bmm",
        "einsum",
        "abs",
        "sigmoid",
        "tanh",
        "softmax",
        "view_as_complex",
        "view_as_real",
        "flip",
        "roll",
        "diag",
        "diag_embed",
        "kron",
        "bernoulli",
        "normal",
        "multinomial",
        "floor",
        "ceil",
        "round",
        "maximum",
        "minimum",
        "sign",
        "reciprocal",
        "erf",
        "atan2",
        "tile",
        "repeat_interleave",
        "gather",
        "index_select",
        "masked_fill",
        "narrow",
        "reshape",
        "flatten",
        "squeeze",
        "unsqueeze",
        "transpose",
        "permute",
        "t",
        "clone",
        "triu_indices",
        "tril_indices",
        "cartesian_prod",
        "sum",
        "mean",
        "prod",
        "logsumexp",
        "norm",
        "cdist",
        "hann_window",
        "hamming_window",
        "blackman_window",
        "bartlett_window",
        "kaiser_window",
        "Tensor",
        "FloatTensor",
        "DoubleTensor",
        "HalfTensor",
        "BFloat16Tensor",
        "LongTensor",
        "IntTensor",
        "ShortTensor",
        "ByteTensor",
        "CharTensor",
        "BoolTensor",
    ]
)

# Tensor methods that return a tensor. Those also on nn.Module (to, float, cuda, ...) are trusted
# only on a value already known to be a tensor.
TENSOR_METHODS: Final = frozenset(
    [
        "float",
        "double",
        "half",
        "bfloat16",
        "long",
        "int",
        "bool",
        "byte",
        "short",
        "char",
        "cfloat",
        "cdouble",
        "to",
        "cuda",
        "cpu",
        "type",
        "type_as",
        "detach",
        "clone",
        "contiguous",
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "expand",
        "expand_as",
        "repeat",
        "repeat_interleave",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "transpose",
        "permute",
        "t",
        "tril",
        "triu",
        "flip",
        "roll",
        "exp",
        "log",
        "sin",
        "cos",
        "sqrt",
        "rsqrt",
        "pow",
        "abs",
        "neg",
        "sigmoid",
        "tanh",
        "softmax",
        "log_softmax",
        "cumsum",
        "cumprod",
        "clamp",
        "clip",
        "fill_",
        "zero_",
        "normal_",
        "uniform_",
        "masked_fill",
        "masked_fill_",
        "index_select",
        "gather",
        "narrow",
        "matmul",
        "mm",
        "outer",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty",
        "new_tensor",
        "mul",
        "add",
        "sub",
        "div",
        "mul_",
        "add_",
        "sub_",
        "div_",
        "square",
        "reciprocal",
        "sign",
        "round",
        "floor",
        "ceil",
    ]
)
_ARITHMETIC: Final = (
    cst.Add,
    cst.Subtract,
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.Power,
    cst.MatrixMultiply,
    cst.BitAnd,
    cst.BitOr,
    cst.BitXor,
    cst.LeftShift,
    cst.RightShift,
)
_LITERALS: Final = (
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.List,
    cst.Tuple,
    cst.Dict,
    cst.Set,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
    cst.Lambda,
)


@dataclasses.dataclass(frozen=True)
class Store:
    """One store of the attribute: its line, the small statement, the class's method it is in
    (and the method's ``self``), its form, the value stored (None for ``+=`` and ``del``), and
    whether it is in a function nested in the method or in a loop."""

    statement: Statement
    small: cst.BaseSmallStatement
    method: cst.FunctionDef
    self_name: str
    form: Form
    value: cst.BaseExpression | None
    nested: bool
    loop: bool


def stores_of(index: Index, cls: cst.ClassDef, attribute: str) -> list[Store]:
    """Every store of ``self.<attribute>`` in the methods of ``cls`` (not in nested classes)."""
    found = []
    for statement in index.statements:
        if cls not in statement.ancestors:
            continue
        inner = statement.between(cls)
        if len(inner) < 2 or not isinstance(inner[1], cst.FunctionDef):
            continue  # the class body itself, or not in a method
        if any(isinstance(n, cst.ClassDef) for n in inner):
            continue
        method = inner[1]
        self_name = self_name_of(method)
        if self_name is None:
            continue
        nested = any(isinstance(n, (cst.FunctionDef, cst.Lambda)) for n in inner[2:])
        loop = any(isinstance(n, (cst.For, cst.While)) for n in inner)
        for small in statement.node.body:
            for form, value in _forms(small, self_name, attribute, cls.name.value):
                found.append(Store(statement, small, method, self_name, form, value, nested, loop))
    return found


def _forms(
    small: cst.BaseSmallStatement, self_name: str, attribute: str, owner: str
) -> Iterator[tuple[Form, cst.BaseExpression | None]]:
    """The stores of ``self.<attribute>`` ``small`` makes in the class ``owner`` (where
    ``self.__x`` is ``_Owner__x``)."""

    def target(node: cst.BaseExpression) -> bool:
        return is_self_attribute(node, self_name, attribute, owner)

    def stores(node: cst.BaseExpression) -> bool:
        """Whether assigning to ``node`` stores ``self.<attribute>`` (not ``self.x[i]``,
        not ``self.x.y``)."""
        if isinstance(node, (cst.Tuple, cst.List)):
            return any(stores(element.value) for element in node.elements)
        if isinstance(node, cst.StarredElement):
            return stores(node.value)
        return target(node)

    if isinstance(small, cst.Assign):
        if len(small.targets) == 1 and target(small.targets[0].target):
            yield "assign", small.value
        elif any(stores(t.target) for t in small.targets):
            yield "several", small.value
    elif isinstance(small, cst.AnnAssign):
        if small.value is not None and target(small.target):
            yield "assign", small.value
    elif isinstance(small, cst.AugAssign):
        if target(small.target):
            yield "augmented", None
    elif isinstance(small, cst.Del):
        if stores(small.target):
            yield "delete", None
    elif isinstance(small, cst.Expr) and m.matches(
        small.value,
        m.Call(func=m.Name("setattr"), args=[m.Arg(m.Name(self_name)), m.Arg(), m.Arg()]),
    ):
        call = small.value
        assert isinstance(call, cst.Call)
        name = call.args[1].value
        if not isinstance(name, cst.SimpleString):
            yield "computed", call.args[2].value
        elif literal(name.value) == attribute:
            yield "setattr", call.args[2].value


# Tensor methods that return a view of the tensor (or the tensor itself): what they store shares
# its memory, which two buffers converted apart no longer do.
_VIEWS: Final = frozenset(
    {"view", "view_as", "reshape", "t", "transpose", "permute", "expand", "expand_as", "narrow"}
    | {"squeeze", "unsqueeze", "flatten", "unflatten", "detach", "as_strided", "select"}
    | {"diagonal", "unfold", "movedim", "swapaxes", "real", "imag", "mT", "T"}
)


def stored_names(cls: cst.ClassDef) -> list[str]:
    """The names ``cls`` assigns as ``<name>.<attribute> = ...`` anywhere in its body, each once,
    in the order written (``stores_of`` tells which are stores of ``self``)."""
    attribute = m.Attribute(value=m.Name())
    targets = m.findall(cls, m.AssignTarget(attribute) | m.AnnAssign(target=attribute))
    return list(
        dict.fromkeys(
            t.target.attr.value  # type: ignore[attr-defined]
            for t in targets
            if isinstance(t, (cst.AssignTarget, cst.AnnAssign))
        )
    )


def aliased_as(cls: cst.ClassDef, attribute: str) -> str:
    """Another name a method of ``cls`` stores ``self.<attribute>`` itself under, or a view of
    it (``self.shown = self.running``, ``self.w_t = self.w.t()``, ``self.x[0]``); ``""`` if
    none."""
    for node in m.findall(cls, m.Assign(targets=[m.AssignTarget(m.Attribute(value=m.Name()))])):
        assert isinstance(node, cst.Assign)
        target = node.targets[0].target
        assert isinstance(target, cst.Attribute)
        assert isinstance(target.value, cst.Name)
        if target.attr.value == attribute:
            continue
        value = node.value
        while True:
            if isinstance(value, cst.Subscript):
                value = value.value
            elif isinstance(value, cst.Call) and m.matches(
                value.func, m.Attribute(attr=m.Name(m.MatchIfTrue(lambda a: a in _VIEWS)))
            ):
                value = value.func.value  # type: ignore[attr-defined]
            elif isinstance(value, cst.Attribute) and value.attr.value in _VIEWS:
                value = value.value
            else:
                break
        if m.matches(value, m.Attribute(value=m.Name(target.value.value), attr=m.Name(attribute))):
            return target.attr.value
    return ""


def spelled_dtype(
    value: cst.BaseExpression,
    method: cst.FunctionDef,
    torch_names: frozenset[str],
    complex_: bool = True,
) -> str:
    """How the source of ``value`` in ``method`` (the value, and what the method assigns to the
    local names it reads, through those) spells a tensor of another dtype than the default float
    one (``torch.float64``, ``.double()``, ``torch.polar``); ``""`` if it does not. A value
    converted last by ``.float()`` is of the default dtype whatever it was made in.
    ``complex_``: whether a complex dtype counts (autoreg carries an undeclared complex tensor
    complex under any ``.to()``; a buffer would be cast to a real dtype)."""
    if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("float")), args=[])):
        return ""
    skipped = frozenset() if complex_ else _COMPLEX
    dtypes, methods, functions = (
        _OTHER_DTYPES - skipped,
        _OTHER_DTYPE_METHODS - skipped,
        _COMPLEX_FUNCTIONS - skipped,
    )
    torch_name = m.Name(m.MatchIfTrue(lambda name: name in torch_names))
    spelled = (
        m.Attribute(value=torch_name, attr=m.Name(m.MatchIfTrue(lambda a: a in dtypes)))
        | m.Call(func=m.Attribute(attr=m.Name(m.MatchIfTrue(lambda a: a in methods))))
        | m.Call(
            func=m.Attribute(value=torch_name, attr=m.Name(m.MatchIfTrue(lambda a: a in functions)))
        )
    )
    todo, seen = [value], set()
    while todo:
        node = todo.pop()
        found = m.findall(node, spelled)
        if found:
            first = found[0]
            if isinstance(first, cst.Call):
                inner = first.func
                assert isinstance(inner, cst.Attribute)
                return (
                    f"{dotted(inner)}()"
                    if inner.attr.value in _COMPLEX_FUNCTIONS
                    else f".{inner.attr.value}()"
                )
            return dotted(first)  # type: ignore[arg-type]
        for name in {n.value for n in m.findall(node, m.Name()) if isinstance(n, cst.Name)}:
            if name in seen or name in torch_names:
                continue
            seen.add(name)
            for bound in m.findall(
                method.body,
                m.Assign(targets=[m.ZeroOrMore(), m.AssignTarget(m.Name(name)), m.ZeroOrMore()])
                | m.AnnAssign(target=m.Name(name))
                | m.AugAssign(target=m.Name(name)),
            ):
                if isinstance(bound, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and bound.value:
                    todo.append(bound.value)
    return ""


def construction_methods(cls: cst.ClassDef, ran: set[str]) -> set[str]:
    """The methods of ``cls`` that run while the module is built: the construction methods,
    ``ran`` (methods seen storing during construction), and what they call through ``self``."""
    methods = {node.name.value: node for node in cls.body.body if isinstance(node, cst.FunctionDef)}
    found = set()
    todo = [name for name in (CONSTRUCTION | ran) if name in methods]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        self_name = self_name_of(methods[name])
        if self_name is None:
            continue
        call = m.Call(func=m.Attribute(value=m.Name(self_name)))
        for node in m.findall(methods[name], call):
            callee = node.func.attr.value  # type: ignore[attr-defined]
            if callee in methods and callee not in found:
                todo.append(callee)
    return found


def value_kind(
    value: cst.BaseExpression,
    method: cst.FunctionDef,
    self_name: str,
    attribute: str,
    torch_names: frozenset[str],
    depth: int = 0,
) -> Kind | None:
    """What ``value`` stores, when the source alone says it (None: unknown). ``torch_names``:
    the names the file binds to the torch module."""

    def kind(node: cst.BaseExpression) -> Kind | None:
        return value_kind(node, method, self_name, attribute, torch_names, depth + 1)

    if depth > 20:
        return None
    if isinstance(value, cst.Name):
        if value.value == "None":
            return "none"
        if value.value in ("True", "False"):
            return "other"
        return _local(value.value, method, kind)
    if isinstance(value, _LITERALS):
        return "other"
    if m.matches(value, m.Attribute(value=m.Name(self_name), attr=m.Name(attribute))):
        return "tensor"  # the buffer itself
    if isinstance(value, cst.Call):
        return _call(value, kind, torch_names)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, _ARITHMETIC):
        return "tensor" if "tensor" in (kind(value.left), kind(value.right)) else None
    if isinstance(value, cst.UnaryOperation) and not isinstance(value.operator, cst.Not):
        return "tensor" if kind(value.expression) == "tensor" else None
    if isinstance(value, cst.Subscript):
        return "tensor" if kind(value.value) == "tensor" else None
    if isinstance(value, cst.IfExp):
        both = {kind(value.body), kind(value.orelse)}
        return "tensor" if both <= {"tensor", "none"} and "tensor" in both else None
    return None


# The functions of the file a call may run, as the source says, each with its ``self`` (""
# for a function outside a class); none where the source does not say (``changes._callees``).
Callees: TypeAlias = Callable[[cst.Call], list[tuple[cst.FunctionDef, str]]]


def other_value(
    value: cst.BaseExpression,
    method: cst.FunctionDef,
    self_name: str,
    attribute: str,
    torch_names: frozenset[str],
    takes: frozenset[str],
    callees: Callees | None = None,
    _calling: frozenset[int] = frozenset(),
) -> _Other:
    """A value outside ``takes`` that the source shows ``value`` may store in a configuration the
    factory did not build, and the parameter whose default it is (None: the source shows none).

    A store that ran with a tensor is judged by the run, but one run is one configuration: in
    ``t if use_bias else 0.0``, ``scale or 1.0``, a parameter ``alpha=0.25`` the factory passed a
    tensor for, or a local bound to such an expression, the other configuration stores a value
    that register_buffer (or a buffer) refuses. An alternative counts where the source spells it
    out (a literal, an ``nn.Parameter``, the default of ``get(key, 0.25)``) and where a parameter's
    default is not shown to be a tensor or None (``scale=DEFAULT_SCALE``, ``angle=math.pi``): the
    configuration that uses the default stores it. A branch taken only for a tensor
    (``s if isinstance(s, torch.Tensor) else torch.tensor(s)``) stores none. A call of a
    function of the file (``callees``: ``loss_or_zero(...)``, ``self._loss(...)``) stores what
    any of its ``return`` statements may return, read the same way; a call of any other that
    returned a tensor is trusted, as the run saw it.
    """
    followed: dict[str, _Other] = {}

    def other(node: cst.BaseExpression, names: tuple[str, ...]) -> _Other:
        """``names``: the names being followed, so that ``x = x or 1.0`` ends."""
        found = value_kind(node, method, self_name, attribute, torch_names)
        if found is not None:
            return (node, None) if found not in takes else None
        if isinstance(node, cst.IfExp):
            for branch, when in ((node.body, True), (node.orelse, False)):
                if _is_checked(branch, _builtin_check(node.test), when):
                    return branch, None  # the name as it is: a str there, whatever its default
            checked = _tensor_check(node.test, torch_names)  # a name proven a tensor, or not
            body = None if _is_checked(node.body, checked, True) else other(node.body, names)
            if body is not None or _is_checked(node.orelse, checked, False):
                return body
            return other(node.orelse, names)
        if isinstance(node, cst.Call):  # get(key, default), getattr(obj, name, default)
            fallback = _fallback(node)
            if fallback is not None:
                return other(fallback, names)
            return returned(node)
        if isinstance(node, cst.BooleanOperation):
            return other(node.left, names) or other(node.right, names)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
            # Arithmetic stores another value only when neither side may be a tensor.
            both = other(node.left, names) and other(node.right, names)
            return (node, None) if both else None
        if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Not):
            return (node, None) if other(node.expression, names) else None
        if not isinstance(node, cst.Name) or node.value in names:
            return None
        if node.value not in followed:
            followed[node.value] = name(node.value, (*names, node.value))
        return followed[node.value]

    def returned(call: cst.Call) -> _Other:
        """What a function of the file that ``call`` runs may return outside ``takes``."""
        for callee, inner in callees(call) if callees is not None else []:
            if id(callee) in _calling:  # recursion: what it returns is read already
                continue
            for result in _returns(callee):
                found = other_value(
                    result, callee, inner, attribute, torch_names, takes, callees,
                    _calling | {id(callee)},
                )  # fmt: skip
                if found is not None:
                    return found[0], None
        return None  # none of the file's, or none of theirs may: trusted

    def name(variable: str, names: tuple[str, ...]) -> _Other:
        """A parameter's default, then every value the method binds to the name."""
        param = _parameters(method).get(variable)
        if param is not None and param.default is not None:
            default = other(param.default, names)
            if default is not None:
                return default[0], default[1] or variable
            if value_kind(param.default, method, self_name, attribute, torch_names) is None:
                return param.default, variable  # a value the source names, not shown a tensor
        for bound in _bindings(variable, method) or []:
            found = other(bound, names)
            if found is not None:
                return found
        return None

    return other(value, ())


def passed_parameters(
    value: cst.BaseExpression, method: cst.FunctionDef, torch_names: frozenset[str]
) -> list[str]:
    """The parameters of ``method`` that ``value`` may store as they are passed (``scale``,
    ``t if t is not None else default``, ``scale or 1.0``, ``2 * scale``, a local bound to one):
    what a caller passes there is what is stored, a float if it passes one. A branch taken only
    for a tensor (``s if isinstance(s, torch.Tensor) else ...``) passes nothing; a call's result
    is no parameter (``torch.as_tensor(scale)``)."""
    stars = (method.params.star_arg, method.params.star_kwarg)
    params = {name for name, param in _parameters(method).items() if param not in stars}
    found: list[str] = []
    todo, seen = [value], set()
    while todo:
        node = todo.pop()
        if isinstance(node, cst.Name):
            if node.value in params:
                if node.value not in found:
                    found.append(node.value)
            elif node.value not in seen:
                seen.add(node.value)
                todo.extend(_bindings(node.value, method) or [])
        elif isinstance(node, cst.IfExp):
            checked = _tensor_check(node.test, torch_names)
            if not _is_checked(node.body, checked, True):
                todo.append(node.body)
            if not _is_checked(node.orelse, checked, False):
                todo.append(node.orelse)
        elif isinstance(node, cst.BooleanOperation) or (
            isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC)
        ):
            todo += [node.left, node.right]
        elif isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Not):
            todo.append(node.expression)
    return found


def _returns(function: cst.FunctionDef) -> list[cst.BaseExpression]:
    """The values ``function``'s own ``return`` statements give (not those of functions or
    classes nested in it); a bare ``return`` gives None."""
    nested = [n for n in m.findall(function, m.FunctionDef() | m.ClassDef()) if n is not function]
    inner = {id(r) for node in nested for r in m.findall(node, m.Return())}
    return [
        node.value if node.value is not None else cst.Name("None")
        for node in m.findall(function, m.Return())
        if id(node) not in inner and isinstance(node, cst.Return)
    ]


def _tensor_check(test: cst.BaseExpression, torch_names: frozenset[str]) -> tuple[str, bool] | None:
    """``(name, True)`` for ``isinstance(name, torch.Tensor)`` (``torch`` a name the file binds
    to the torch module), ``(name, False)`` for its negation; None for any other test. A tuple of
    types proves nothing (``(torch.Tensor, float)``), nor does a class the file names ``Tensor``
    (another library's, maybe): the branch it guards is then judged as any other."""
    negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    call = test.expression if isinstance(test, cst.UnaryOperation) and negated else test
    if not isinstance(call, cst.Call) or not m.matches(
        call, m.Call(func=m.Name("isinstance"), args=[m.Arg(m.Name()), m.Arg()])
    ):
        return None
    head, _, last = dotted(call.args[1].value).partition(".")
    if head not in torch_names or last != "Tensor":
        return None
    return call.args[0].value.value, not negated  # type: ignore[attr-defined]


_BUILTINS: Final = frozenset({"str", "bytes", "int", "float", "bool", "list", "tuple", "dict"})


def _builtin_check(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """``(name, True)`` for ``isinstance(name, str)`` (or another builtin type that is no
    tensor), ``(name, False)`` for its negation: in the branch it guards, the name stores such
    a value whatever its default is (dreamerv3-torch's ``std if isinstance(std, str) else
    torch.tensor(...)``, whose default 1.0 takes the other branch); None for any other test."""
    negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    call = test.expression if isinstance(test, cst.UnaryOperation) and negated else test
    if not isinstance(call, cst.Call) or not m.matches(
        call, m.Call(func=m.Name("isinstance"), args=[m.Arg(m.Name()), m.Arg(m.Name())])
    ):
        return None
    if call.args[1].value.value not in _BUILTINS:  # type: ignore[attr-defined]
        return None
    return call.args[0].value.value, not negated  # type: ignore[attr-defined]


def _is_checked(node: cst.BaseExpression, checked: tuple[str, bool] | None, when: bool) -> bool:
    """Whether ``node`` is the name a tensor check proves a tensor in the branch taken ``when``
    the test is true (True: the body) or false (False: the else branch)."""
    return checked is not None and checked[1] is when and m.matches(node, m.Name(checked[0]))


def _fallback(call: cst.Call) -> cst.BaseExpression | None:
    """The default of ``mapping.get(key, default)`` and ``getattr(obj, name, default)``: what
    the call returns when the key or attribute is missing."""
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    if m.matches(call.func, m.Attribute(attr=m.Name("get"))) and len(positional) == 2:
        return positional[1]
    if m.matches(call.func, m.Name("getattr")) and len(positional) == 3:
        return positional[2]
    return None


def _call(
    call: cst.Call, kind: Callable[[cst.BaseExpression], Kind | None], torch_names: frozenset[str]
) -> Kind | None:
    if any(arg.keyword is not None and arg.keyword.value == "requires_grad" for arg in call.args):
        return None  # a weight, maybe: what the factory ran is judged, not this
    func = call.func
    name = dotted(func)
    if name == "Parameter" or name.endswith("nn.Parameter"):
        return "parameter"
    head, _, last = name.partition(".")
    if head in torch_names and last in TENSOR_FUNCTIONS:
        return "tensor"
    if name in _NUMBER_FUNCTIONS or (head == "math" and last):
        return "other"  # float(x), int(x), math.sqrt(d): a Python number
    if isinstance(func, cst.Attribute) and func.attr.value in _NUMBER_METHODS:
        return "other"  # t.item(), t.tolist(), t.numpy(): never a tensor
    if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_METHODS:
        method = func.attr.value
        if method == "type" and not call.args:
            return "other"  # the type's name, a string
        if kind(func.value) == "tensor" or method in _TENSOR_ONLY:
            return "tensor"
    return None


# Builtins, and tensor methods, that give a Python value (a number, a list, an array), never a
# tensor.
_NUMBER_FUNCTIONS: Final = frozenset(["float", "int", "bool", "complex", "len", "str"])
_NUMBER_METHODS: Final = frozenset(["item", "tolist", "numpy"])

# Methods only tensors have (neither nn.Module nor numpy arrays): the value is a tensor whatever
# the receiver's source says.
_TENSOR_ONLY: Final = frozenset(
    [
        "detach",
        "type_as",
        "contiguous",
        "unsqueeze",
        "masked_fill",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty",
        "new_tensor",
    ]
)


def _local(
    name: str, method: cst.FunctionDef, kind: Callable[[cst.BaseExpression], Kind | None]
) -> Kind | None:
    """A local variable of ``method``: what every value bound to it is, if they all agree."""
    if name in _parameters(method):
        return None
    values = _bindings(name, method)
    if values is None:
        return None
    kinds = {kind(value) for value in values}
    if len(kinds) != 1 or None in kinds:
        return None
    return kinds.pop()


def _parameters(method: cst.FunctionDef) -> dict[str, cst.Param]:
    """The parameters of ``method``, by name."""
    params = method.params
    named = (*params.posonly_params, *params.params, *params.kwonly_params)
    found = {p.name.value: p for p in named}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            found[star.name.value] = star
    return found


def _bindings(name: str, method: cst.FunctionDef) -> list[cst.BaseExpression] | None:
    """Every value ``method`` binds to the local ``name`` by a plain assignment (None: it is
    also bound in a way that hides the value: unpacked, a loop variable, a walrus)."""
    values = []
    for node in m.findall(method, m.Assign() | m.AnnAssign() | m.For() | m.NamedExpr()):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    values.append(node.value)
                elif _binds(target.target, name):
                    return None  # unpacked from something
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None and _binds(node.target, name):
                values.append(node.value)
        elif _binds(node.target, name):  # type: ignore[attr-defined]
            return None  # a loop variable, a walrus
    return values


def _binds(target: cst.BaseExpression, name: str) -> bool:
    """Whether assigning to ``target`` binds the local ``name``."""
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(element.value, name) for element in target.elements)
    if isinstance(target, cst.StarredElement):
        return _binds(target.value, name)
    return False
