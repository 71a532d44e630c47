"""Each edit checked against the code it rewrites, and turned into changes by node, or refused.

``Changes.make`` finds the class an edit names (in the file's ``source.Index``) and checks that
its code has the simple shape the edit expects: the bases the class had when the model was built;
a store ``self.x = ...`` in a method of the class, not in a loop or a nested function nor before
``super().__init__()``; an ``__init__`` to declare a buffer in, and no ``hasattr`` check that a
registered name would change; a list or dict display to wrap. What fits is noted by node (new
bases for a class, a small statement replaced, a statement inserted after another) with the
imports it needs; what does not comes back as a ``HandEdit`` with the reason. ``codemod`` applies
the changes in one pass.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from .._messages.fix import (
    FIX_A_PARAMETER,
    FIX_HAND_ALIASED,
    FIX_HAND_ALIASED_BASE_EDIT,
    FIX_HAND_ALIASED_EDIT,
    FIX_HAND_ANOTHER_VALUE,
    FIX_HAND_ANOTHER_VALUE_EDIT,
    FIX_HAND_AUTOREG_NAME,
    FIX_HAND_AUTOREG_NAME_EDIT,
    FIX_HAND_BASES,
    FIX_HAND_BASES_EDIT,
    FIX_HAND_BEFORE_INIT,
    FIX_HAND_COMPUTED,
    FIX_HAND_COMPUTED_EDIT,
    FIX_HAND_DECLARE_EDIT,
    FIX_HAND_DECLARED,
    FIX_HAND_DECLARED_EDIT,
    FIX_HAND_DELETED,
    FIX_HAND_DELETED_EDIT,
    FIX_HAND_HELD_BACK,
    FIX_HAND_INIT_SUBCLASS,
    FIX_HAND_INIT_SUBCLASS_EDIT,
    FIX_HAND_LOOP,
    FIX_HAND_MIXED_EDIT,
    FIX_HAND_MODULES_EDIT,
    FIX_HAND_NESTED,
    FIX_HAND_NO_INIT,
    FIX_HAND_NOT_ASSIGN,
    FIX_HAND_NOT_RUN,
    FIX_HAND_NOT_RUN_EDIT,
    FIX_HAND_NOT_RUN_LATER,
    FIX_HAND_NOT_RUN_LATER_EDIT,
    FIX_HAND_OTHER_VALUE,
    FIX_HAND_PROBED,
    FIX_HAND_REGISTER_EDIT,
    FIX_HAND_SETATTR,
    FIX_HAND_SETATTR_EDIT,
    FIX_HAND_SPELLED_DTYPE,
    FIX_HAND_SPELLED_DTYPE_BASE_EDIT,
    FIX_HAND_SPELLED_DTYPE_EDIT,
    FIX_HAND_STALE,
    FIX_HAND_STALE_EDIT,
    FIX_HAND_WRAP_METHOD,
    FIX_HAND_WRAP_SHAPE,
    FIX_NOT_A_TENSOR,
    FIX_OF_PARAMETER,
    PLAIN_COMMENT_ALIAS,
    PLAIN_COMMENT_SPELLED,
)
from .edits import (
    DeclareBuffer,
    DeclarePlain,
    Edit,
    HandEdit,
    MakeAutoreg,
    RegisterBuffer,
    WrapModules,
)
from .source import (
    Index,
    assigns,
    before_init,
    dotted,
    probes,
    self_name_of,
    super_init,
)
from .stores import (
    Callees,
    Store,
    aliased_as,
    construction_methods,
    other_value,
    spelled_dtype,
    stored_names,
    stores_of,
    value_kind,
)

__all__ = ["Changes"]

# Methods of list and dict that nn.ModuleList / nn.ModuleDict do not have.
_NOT_IN = {
    "ModuleList": frozenset({"clear", "copy", "count", "index", "remove", "reverse", "sort"}),
    "ModuleDict": frozenset({"copy", "fromkeys", "get", "popitem", "setdefault"}),
}
_SPACE = cst.SimpleWhitespace(" ")
_Refuse = Callable[[str, str], None]


class Changes:
    """What to change, by node: new bases, replaced small statements, statements inserted after
    a statement; and the imports the changes need."""

    def __init__(self, index: Index, filename: str) -> None:
        self.index = index
        self.filename = filename
        self.bases: dict[cst.ClassDef, list[cst.Arg]] = {}
        self.replaced: dict[cst.BaseSmallStatement, cst.BaseSmallStatement] = {}
        self.after: dict[cst.SimpleStatementLine, list[cst.SimpleStatementLine]] = {}
        # names kept plain, if made autoreg, and why (a comment)
        self.plain: dict[cst.ClassDef, list[tuple[str, str]]] = {}
        self.imports: set[str] = set()
        self.made: list[Edit] = []
        self.held_back: set[tuple[cst.ClassDef, str]] = set()  # names _register left as they are
        self.hand: list[HandEdit] = []

    def make(self, edit: Edit) -> None:
        cls = self.index.find_class(edit.cls.qualname, edit.cls.lineno)
        name = edit.cls.short
        attribute = "" if isinstance(edit, MakeAutoreg) else edit.attribute
        lineno = edit.cls.lineno if isinstance(edit, (MakeAutoreg, DeclarePlain)) else edit.lineno

        def refuse(reason: str, fix: str) -> None:
            text = {"cls": edit.cls.qualname, "attribute": attribute}
            hand = HandEdit(
                self.filename,
                lineno,
                f"{name}.{attribute}" if attribute else name,
                reason.format(**text),
                fix.format(**text),
            )
            self.hand.append(hand)

        if cls is None:
            refuse(FIX_HAND_STALE, FIX_HAND_STALE_EDIT)
        elif isinstance(edit, MakeAutoreg):
            self._make_autoreg(cls, edit, refuse)
        elif isinstance(edit, DeclarePlain):  # what the run saw says why, over the source
            plain = self.plain.setdefault(cls, [])
            plain[:] = [(n, c) for n, c in plain if n != edit.attribute]
            plain.append((edit.attribute, edit.comment))
        elif isinstance(edit, DeclareBuffer):
            self._declare(cls, edit, refuse)
        elif isinstance(edit, RegisterBuffer):
            self._register(cls, edit, refuse)
        else:
            self._store(cls, edit, refuse)

    def _make_autoreg(self, cls: cst.ClassDef, edit: MakeAutoreg, refuse: _Refuse) -> None:
        bases = list(cls.bases)
        if any(dotted(arg.value).startswith("autoreg.") for arg in bases):
            return  # already done
        if any(arg.star for arg in bases) or len(bases) != len(edit.cls.bases):
            refuse(FIX_HAND_BASES, FIX_HAND_BASES_EDIT)
            return
        if _hides_subclasses(cls):
            name = edit.cls.short
            refuse(FIX_HAND_INIT_SUBCLASS, FIX_HAND_INIT_SUBCLASS_EDIT.replace("{cls}", name))
            return
        refusing = self._refusing_declared(cls, edit)
        if refusing is not None:  # an annotation would declare a buffer a store then fails
            refuse(FIX_HAND_DECLARED.replace("{name}", refusing), FIX_HAND_DECLARED_EDIT)
            return
        if self.index.binds_elsewise("autoreg") or self.index.binds_around(cls, "autoreg"):
            # autoreg.Module would be the file's own, or a function's around the class
            refuse(FIX_HAND_AUTOREG_NAME, FIX_HAND_AUTOREG_NAME_EDIT)
            return
        # Only a name (nn.Module, torch.nn.Module, Module) is replaced; an expression that gave
        # nn.Module this time (a conditional, a call) keeps its meaning: the mixin goes first.
        if edit.replace is not None and dotted(bases[edit.replace].value):
            bases[edit.replace] = bases[edit.replace].with_changes(value=_expr("autoreg.Module"))
        else:
            # One base per line stays one per line: the mixin takes the first base's indent.
            space: cst.BaseParenthesizableWhitespace = _SPACE
            if isinstance(cls.lpar, cst.LeftParen) and isinstance(
                cls.lpar.whitespace_after, cst.ParenthesizedWhitespace
            ):
                space = cls.lpar.whitespace_after
            comma = cst.Comma(whitespace_after=space)
            bases.insert(0, cst.Arg(_expr("autoreg.AutoRegisterMixin"), comma=comma))
        self.bases[cls] = bases
        self.imports.add("autoreg")
        self.made.append(edit)
        self._keep_plain_by_source(cls, edit)

    def _keep_plain_by_source(self, cls: cst.ClassDef, edit: MakeAutoreg) -> None:
        """Declare ``autoreg.Plain``, and list, each name of ``cls`` that autoreg would convert
        wrongly in a configuration the run did not build (the run's own are ``DeclarePlain``
        edits), as the buffer style holds such a name back: a store whose source spells a float
        dtype other than the default one (``stores.spelled_dtype``; a complex one only for a
        declared name, a buffer: autoreg carries an undeclared complex tensor complex); a name
        another store makes an alias of, or a view of (``stores.aliased_as``), with that alias:
        two buffers, converted apart. A name stored a parameter or a module anywhere is
        nn.Module's, converted as before."""
        torch_names = self.index.torch_names()
        for attribute in stored_names(cls):
            stores = [
                s
                for s in stores_of(self.index, cls, attribute)
                if s.value is not None and s.form in ("assign", "setattr")
            ]
            kinds = {
                value_kind(s.value, s.method, s.self_name, attribute, torch_names)
                for s in stores
                if s.value is not None
            }
            if not stores or kinds & {"parameter", "module"}:
                continue
            text = {"cls": edit.cls.qualname, "attribute": attribute}
            aliased = aliased_as(cls, attribute)
            if aliased:
                text["other"] = aliased
                reason = FIX_HAND_ALIASED.format(**text)
                fix = FIX_HAND_ALIASED_BASE_EDIT
                self._plain_listed(
                    cls, edit, attribute, stores[0], PLAIN_COMMENT_ALIAS, reason, fix
                )
                self._keep_plain(cls, aliased, PLAIN_COMMENT_ALIAS)
                continue
            declared = attribute in edit.cls.declared
            for store in stores:
                assert store.value is not None
                spelling = spelled_dtype(store.value, store.method, torch_names, declared)
                if spelling:
                    comment = PLAIN_COMMENT_SPELLED.format(spelling=spelling)
                    reason = FIX_HAND_SPELLED_DTYPE.replace("{spelling}", spelling)
                    reason = reason.format(**text)
                    fix = FIX_HAND_SPELLED_DTYPE_BASE_EDIT.format(**text)
                    self._plain_listed(cls, edit, attribute, store, comment, reason, fix)
                    break

    def _plain_listed(
        self,
        cls: cst.ClassDef,
        edit: MakeAutoreg,
        attribute: str,
        store: Store,
        comment: str,
        reason: str,
        fix: str,
    ) -> None:
        """``attribute: autoreg.Plain  # comment`` in ``cls``, and ``store`` listed."""
        self._keep_plain(cls, attribute, comment)
        name = f"{edit.cls.short}.{attribute}"
        hand = HandEdit(self.filename, store.statement.start, name, reason, fix)
        if hand not in self.hand:
            self.hand.append(hand)

    def _keep_plain(self, cls: cst.ClassDef, attribute: str, comment: str) -> None:
        """``attribute: autoreg.Plain  # comment`` in ``cls``, unless it is declared so already
        (a ``DeclarePlain`` of the run replaces it: what the run saw says why)."""
        plain = self.plain.setdefault(cls, [])
        if all(name != attribute for name, _ in plain):
            plain.append((attribute, comment))

    def _refusing_declared(self, cls: cst.ClassDef, edit: MakeAutoreg) -> str | None:
        """The first name the annotations of ``cls`` would declare a buffer once it is
        autoreg's (``temperature: torch.Tensor``) that one of its stores may give another value
        than a tensor, a parameter or None (a setter's float): the declared buffer would refuse
        it. A store the run saw is known by what it stored there, as in the buffer style; one it
        did not, by its source. (A parameter under such a name is one, as on nn.Module:
        ``weight: Tensor`` for TorchScript, then ``self.weight = nn.Parameter(...)``.)"""
        takes = frozenset({"tensor", "none", "parameter"})
        torch_names = self.index.torch_names()
        for attribute in edit.cls.declared:
            for store in stores_of(self.index, cls, attribute):
                if store.form in ("delete", "augmented") or store.value is None:
                    continue
                kinds: set[str | None] = {  # what it stored where it ran
                    kind
                    for name, line, kind in edit.cls.seen
                    if name == attribute and store.statement.start <= line <= store.statement.end
                } or {
                    value_kind(store.value, store.method, store.self_name, attribute, torch_names)
                }
                if (
                    not kinds <= takes
                    or _other(store, attribute, torch_names, takes, self.index, cls) is not None
                ):
                    return attribute
        return None

    def _register(self, cls: cst.ClassDef, edit: RegisterBuffer, refuse: _Refuse) -> None:
        """Every store of ``edit.attribute`` in ``cls``: those in a method that runs while the
        module is built become ``register_buffer``; each must store what a buffer takes (a
        tensor or None; outside construction also a parameter or a module, which nn.Module
        registers in its place), or it is listed; then none is rewritten (a buffer would raise
        on that value, on a built module or in the configuration that stores it): the rest are
        listed with it, held back. A name is rewritten whole or not at all."""
        attribute = edit.attribute
        name = f"{edit.cls.short}.{attribute}"
        text = {"cls": edit.cls.qualname, "attribute": attribute}

        def listed(store: Store, reason: str, fix: str) -> None:
            hand = HandEdit(
                self.filename,
                store.statement.start,
                name,
                reason.format(**text),
                fix.format(**text),
            )
            if hand not in self.hand:
                self.hand.append(hand)

        stores = stores_of(self.index, cls, attribute)
        if edit.lineno and not any(
            s.statement.start <= edit.lineno <= s.statement.end for s in stores
        ):
            statement = self.index.statement(cls, edit.lineno)
            if statement is not None and any(
                m.matches(small, m.Expr(m.Call(func=m.Name("setattr"))))
                for small in statement.node.body
            ):
                refuse(FIX_HAND_SETATTR, FIX_HAND_SETATTR_EDIT)
            else:
                refuse(FIX_HAND_NOT_ASSIGN, FIX_HAND_REGISTER_EDIT)
            return
        aliased = aliased_as(cls, attribute)
        if aliased:  # another store makes it an alias: two buffers would be converted apart
            for store in stores:
                text["other"] = aliased
                listed(store, FIX_HAND_ALIASED, FIX_HAND_ALIASED_EDIT)
            self.held_back.add((cls, attribute))
            return
        built = construction_methods(cls, set(edit.built))
        torch_names = self.index.torch_names()
        rewrites: list[tuple[Store, cst.Expr]] = []
        # A store that may store what a buffer refuses (a setter's float, the 0.0 of another
        # configuration, `self.t = fixed_t` after `self.t = torch.ones(())`) or that runs before
        # nn.Module.__init__: nothing of the name is rewritten.
        refused = False
        for store in stores:
            seen = {
                kind
                for line, kind in (*edit.seen, *([(edit.lineno, "tensor")] if edit.lineno else []))
                if store.statement.start <= line <= store.statement.end
            }
            construction = store.method.name.value in built
            if store.form == "delete":
                listed(store, FIX_HAND_DELETED, FIX_HAND_DELETED_EDIT)
                continue
            if store.form == "augmented":
                continue  # in place, on the buffer
            if store.form == "computed":  # setattr(self, key, value): it may store anything
                ran = edit.lineno and store.statement.start <= edit.lineno <= store.statement.end
                reason, fix = (
                    (FIX_HAND_SETATTR, FIX_HAND_SETATTR_EDIT)
                    if ran
                    else (
                        FIX_HAND_COMPUTED.replace("{self}", store.self_name),
                        FIX_HAND_COMPUTED_EDIT,
                    )
                )
                listed(store, reason, fix)
                refused = True
                continue
            if seen:
                kinds: set[str] = seen
            elif store.value is None:
                kinds = set()
            else:
                found = value_kind(
                    store.value, store.method, store.self_name, attribute, torch_names
                )
                kinds = {found} if found else set()
            takes = (
                {"tensor", "none"} if construction else {"tensor", "none", "parameter", "module"}
            )
            if construction and any(
                done.method is store.method and done.statement.start < store.statement.start
                for done, _ in rewrites
            ):
                # After a register_buffer of the name earlier in the method, nn.Module replaces
                # the buffer with a parameter (learn=True: self.x = nn.Parameter(self.x)).
                takes |= {"parameter"}
            if (
                construction
                and len(stores) == 2
                and stores[0].statement.excludes(stores[1].statement)
            ):
                # The two branches of one if (learnable: a parameter, else a tensor), and no
                # other store: no buffer exists where the parameter is stored.
                takes |= {"parameter"}
            if not kinds:
                reason, fix = (
                    (FIX_HAND_NOT_RUN, FIX_HAND_NOT_RUN_EDIT)
                    if construction
                    else (FIX_HAND_NOT_RUN_LATER, FIX_HAND_NOT_RUN_LATER_EDIT)
                )
                listed(store, reason, fix)
                refused = True
                continue
            if not kinds <= takes:
                what = FIX_A_PARAMETER if kinds - takes == {"parameter"} else FIX_NOT_A_TENSOR
                listed(store, FIX_HAND_OTHER_VALUE.replace("{what}", what), FIX_HAND_MIXED_EDIT)
                refused = True
                continue
            if "parameter" in kinds:
                continue  # kept: nn.Module registers it as a parameter, in the buffer's place
            assert store.value is not None  # not a delete nor augmented
            spelling = spelled_dtype(store.value, store.method, torch_names)
            if spelling:  # a float64 or complex tensor, in a configuration the run did not see
                listed(
                    store,
                    FIX_HAND_SPELLED_DTYPE.replace("{spelling}", spelling),
                    FIX_HAND_SPELLED_DTYPE_EDIT,
                )
                refused = True
                continue
            # The run is one configuration: a store that ran with a tensor, and that the source
            # shows storing another value in another one (t if use_bias else 0.0), is listed.
            # (The value of `self.x, y = ...` is what is unpacked, not what self.x stores.)
            other = (
                _other(store, attribute, torch_names, frozenset(takes), self.index, cls)
                if seen
                else None
            )
            if other is not None:
                listed(store, _another(*other), FIX_HAND_ANOTHER_VALUE_EDIT)
                refused = True
                continue
            if not construction or not edit.rewrite:
                continue  # nn.Module stores it in the buffer
            problem = self._rewritable(store)
            if problem is not None:
                listed(store, problem, FIX_HAND_REGISTER_EDIT)
                refused = refused or problem == FIX_HAND_BEFORE_INIT  # register_buffer raises
                continue
            assert store.value is not None
            call = _register(store.self_name, attribute, store.value)
            rewrites.append((store, cst.Expr(call, semicolon=store.small.semicolon)))
        if refused:
            for store, _ in rewrites:
                listed(store, FIX_HAND_HELD_BACK, FIX_HAND_MIXED_EDIT)
            self.held_back.add((cls, attribute))  # and no None registered for it (_declare)
        elif rewrites:
            self.replaced.update((store.small, call) for store, call in rewrites)
            self.made.append(edit)

    def _rewritable(self, store: Store) -> str | None:
        """Why ``store`` cannot become ``register_buffer`` in place (None: it can)."""
        if store.nested:
            return FIX_HAND_NESTED
        if store.loop:
            return FIX_HAND_LOOP
        if store.form == "several":
            return FIX_HAND_NOT_ASSIGN
        if before_init(self.index, store.method, store.statement, store.self_name):
            return FIX_HAND_BEFORE_INIT
        return None

    def _store(self, cls: cst.ClassDef, edit: WrapModules, refuse: _Refuse) -> None:
        """Rewrite the statement that stores ``edit.attribute`` in a method of ``cls``."""
        fix = FIX_HAND_MODULES_EDIT.replace("{container}", edit.container)
        statement = self.index.statement(cls, edit.lineno)
        method = statement.function() if statement else None
        if statement is None or method is None:
            refuse(FIX_HAND_STALE, FIX_HAND_STALE_EDIT)
            return
        if any(m.matches(s, m.Expr(m.Call(func=m.Name("setattr")))) for s in statement.node.body):
            refuse(FIX_HAND_SETATTR, fix)
            return
        inner = statement.between(cls)
        if inner[1:2] != (method,) or any(isinstance(n, cst.FunctionDef) for n in inner[2:]):
            refuse(FIX_HAND_NESTED, fix)
            return
        if any(isinstance(n, (cst.For, cst.While)) for n in inner):
            refuse(FIX_HAND_LOOP, fix)
            return
        self_name = self_name_of(method)
        small = next(
            (
                s
                for s in statement.node.body
                if assigns(s, self_name, edit.attribute, cls.name.value)
            ),
            None,
        )
        if small is None or self_name is None:
            refuse(FIX_HAND_NOT_ASSIGN, fix)
            return
        value = small.value  # type: ignore[attr-defined]
        if before_init(self.index, method, statement, self_name):
            refuse(FIX_HAND_BEFORE_INIT, fix)
        else:
            self._wrap(cls, edit, small, value, self_name, refuse)

    def _wrap(
        self,
        cls: cst.ClassDef,
        edit: WrapModules,
        small: cst.BaseSmallStatement,
        value: cst.BaseExpression,
        self_name: str,
        refuse: _Refuse,
    ) -> None:
        fix = FIX_HAND_MODULES_EDIT.replace("{container}", edit.container)
        displays = (cst.List, cst.ListComp, cst.Dict, cst.DictComp)
        if not isinstance(value, displays) and not m.matches(
            value, m.Call(func=m.Name("list") | m.Name("dict"))
        ):
            refuse(FIX_HAND_WRAP_SHAPE, fix)
            return
        used = m.Call(func=m.Attribute(value=_self_attr(self_name, edit.attribute)))
        for call in m.findall(cls, used):
            method = call.func.attr.value  # type: ignore[attr-defined]
            if method in _NOT_IN[edit.container]:
                refuse(FIX_HAND_WRAP_METHOD.format(method=method, container=edit.container), fix)
                return
        nn, needs_torch = self.index.torch_nn()
        empty = m.matches(value, m.List(elements=[]) | m.Dict(elements=[]))
        args = [] if empty else [cst.Arg(value)]
        wrapped = cst.Call(_expr(f"{nn}.{edit.container}"), args)
        self.replaced[small] = small.with_changes(value=wrapped)
        if needs_torch:
            self.imports.add("torch")
        self.made.append(edit)

    def _declare(self, cls: cst.ClassDef, edit: DeclareBuffer, refuse: _Refuse) -> None:
        """Register ``edit.attribute`` as None in ``cls.__init__``, right after
        ``super().__init__()``: in place of a ``self.x = None`` there, else a new line; not
        for a name whose stores ``_register`` held back (a store there would meet the buffer)."""
        if (cls, edit.attribute) in self.held_back:
            return
        init = next(
            (
                node
                for node in cls.body.body
                if isinstance(node, cst.FunctionDef) and node.name.value == "__init__"
            ),
            None,
        )
        self_name = self_name_of(init) if init else None
        body = self.index.body_statements(init) if init else []
        start = next(
            (i for i, s in enumerate(body) if self_name and super_init(s, self_name)), None
        )
        if init is None or self_name is None or start is None:
            refuse(FIX_HAND_NO_INIT, FIX_HAND_DECLARE_EDIT)
            return
        if probes(cls, edit.attribute):
            refuse(FIX_HAND_PROBED, FIX_HAND_DECLARE_EDIT)
            return
        call = _register(self_name, edit.attribute, cst.Name("None"))
        for statement in body[start + 1 :]:
            for small in statement.node.body:
                value = getattr(small, "value", None)
                none = isinstance(value, cst.Name) and value.value == "None"
                if none and assigns(small, self_name, edit.attribute, cls.name.value):
                    self.replaced[small] = cst.Expr(call, semicolon=small.semicolon)
                    self.made.append(edit)
                    return
        line = cst.SimpleStatementLine([cst.Expr(call)])
        anchor = body[start].node
        assert isinstance(anchor, cst.SimpleStatementLine)  # a line of an indented body
        self.after.setdefault(anchor, []).append(line)
        self.made.append(edit)


def _hides_subclasses(cls: cst.ClassDef) -> bool:
    """Whether ``cls`` defines an ``__init_subclass__`` that calls no ``__init_subclass__``
    (a registry's): made autoreg's, autoreg's own would not run for its subclasses."""
    return any(
        isinstance(node, cst.FunctionDef)
        and node.name.value == "__init_subclass__"
        and not m.findall(node, m.Call(func=m.Attribute(attr=m.Name("__init_subclass__"))))
        for node in cls.body.body
    )


def _other(
    store: Store,
    attribute: str,
    torch_names: frozenset[str],
    takes: frozenset[str],
    index: Index,
    cls: cst.ClassDef,
) -> tuple[cst.BaseExpression, str | None] | None:
    """What the source shows ``store`` may store, in another configuration, that ``takes`` lacks
    (``other_value``, reading the functions of the file ``store`` calls: ``_callees``); None for
    a store of several names (``self.x, y = ...``), whose value is what is unpacked, not what
    ``self.x`` stores."""
    if store.value is None or store.form == "several":
        return None
    callees = _callees(index, cls, store)
    return other_value(
        store.value, store.method, store.self_name, attribute, torch_names, takes, callees
    )


def _callees(index: Index, cls: cst.ClassDef, store: Store) -> Callees:
    """The functions of the file a call in ``store`` may run: for ``name(...)``, a function
    nested in the method, else a module-level ``def``; for ``self.name(...)``, the method of
    that name in ``cls``, in the classes of the file it derives from, and in those of the file
    that derive from it (an override, as ``D2.scale`` returning ``0.5``); for
    ``Cls.name(...)``, a class of the file's method (a ``staticmethod``). Classes are matched
    by name in the file: reading more can only list more."""
    functions, classes = index.functions, index.named

    def bases(node: cst.ClassDef) -> set[str]:
        return {dotted(arg.value).rpartition(".")[2] for arg in node.bases}

    def family(node: cst.ClassDef) -> list[cst.ClassDef]:
        """``node``, the file's classes it derives from, and those deriving from it."""
        found, names = [node], {node.name.value}
        todo = list(bases(node))
        while todo:  # its bases
            name = todo.pop()
            for base in classes.get(name, []):
                if base not in found:
                    found.append(base)
                    todo.extend(bases(base))
        grown = True
        while grown:  # its subclasses
            grown = False
            for nodes in classes.values():
                for other in nodes:
                    if other not in found and bases(other) & names:
                        found.append(other)
                        names.add(other.name.value)
                        grown = True
        return found

    def methods(owners: list[cst.ClassDef], name: str) -> list[tuple[cst.FunctionDef, str]]:
        return [
            (node, self_name_of(node) or "")
            for owner in owners
            for node in owner.body.body
            if isinstance(node, cst.FunctionDef) and node.name.value == name
        ]

    def callee(call: cst.Call) -> list[tuple[cst.FunctionDef, str]]:
        func = call.func
        if isinstance(func, cst.Name):
            nested = [
                n
                for n in m.findall(store.method, m.FunctionDef(name=m.Name(func.value)))
                if n is not store.method
            ]
            if nested:
                return [(n, "") for n in nested if isinstance(n, cst.FunctionDef)]
            if func.value in functions:
                return [(functions[func.value], "")]
            return []
        if m.matches(func, m.Attribute(value=m.Name(), attr=m.Name())):
            owner = func.value.value  # type: ignore[attr-defined]
            name = func.attr.value  # type: ignore[attr-defined]
            if owner == store.self_name:
                return methods(family(cls), name)
            return methods([c for node in classes.get(owner, []) for c in family(node)], name)
        return []

    return callee


def _another(value: cst.BaseExpression, parameter: str | None) -> str:
    """FIX_HAND_ANOTHER_VALUE for ``value``, quoted on one line (shortened past 40 characters),
    with its braces doubled: the reason is formatted again with the class and attribute."""
    code = " ".join(cst.Module([]).code_for_node(value).split())
    if len(code) > 40:
        code = code[:37] + "..."
    if parameter is not None:
        code = FIX_OF_PARAMETER.format(value=code, parameter=parameter)
    return FIX_HAND_ANOTHER_VALUE.replace("{value}", code.replace("{", "{{").replace("}", "}}"))


def _register(self_name: str, attribute: str, value: cst.BaseExpression) -> cst.Call:
    """``self.register_buffer("attribute", value, persistent=False)``."""
    comma = cst.Comma(whitespace_after=_SPACE)
    return cst.Call(
        cst.Attribute(cst.Name(self_name), cst.Name("register_buffer")),
        [
            cst.Arg(cst.SimpleString(f'"{attribute}"'), comma=comma),
            cst.Arg(value, comma=comma),
            cst.Arg(
                cst.Name("False"),
                keyword=cst.Name("persistent"),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            ),
        ],
    )


def _self_attr(self_name: str, attribute: str) -> m.Attribute:
    return m.Attribute(value=m.Name(self_name), attr=m.Name(attribute))


def _expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)
