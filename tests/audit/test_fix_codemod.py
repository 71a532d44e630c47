"""``autoreg fix``'s codemod and plan, on small sources: each edit made exactly, or refused with
the reason and listed (``autoreg._fix.codemod.rewrite``, ``autoreg._fix.plan.make_plan``)."""

from __future__ import annotations

import textwrap

import pytest

from autoreg._fix.codemod import rewrite
from autoreg._fix.edits import DeclareBuffer, Edit, MakeAutoreg, RegisterBuffer, WrapModules
from autoreg._fix.plan import make_plan
from autoreg._fix.strays import ClassInfo, Kind, Site, Stray

FILE = "/project/model.py"


def cls(source: str, name: str = "A", bases: tuple[str, ...] = ("module",)) -> ClassInfo:
    """The ClassInfo ``inspect`` would give for class ``name`` of ``source``."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines, 1) if line.startswith(f"class {name}"))
    end = next(
        (i - 1 for i, line in enumerate(lines, 1) if i > start and line[:1] not in ("", " ")),
        len(lines),
    )
    return ClassInfo(name, FILE, start, end, bases)


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def run(source: str, edit: Edit) -> tuple[str, list[str]]:
    result = rewrite(source.encode(), FILE, [edit])
    return result.code.decode(), [f"{h.lineno}: {h.name}: {h.reason}" for h in result.hand]


HEADER = "import torch\nfrom torch import nn\n\n\n"


# --- what is rewritten, exactly ----------------------------------------------------------------


def test_an_annotated_assignment_becomes_register_buffer() -> None:
    source = HEADER + textwrap.dedent("""\
        class A(nn.Module):
            def __init__(self):
                super().__init__()
                self.mask: torch.Tensor = torch.ones(2); self.n = 2  # two on a line
        """)
    code, hand = run(source, RegisterBuffer(cls(source), "mask", line_of(source, "self.mask")))
    assert hand == []
    assert code == source.replace(
        "self.mask: torch.Tensor = torch.ones(2);",
        'self.register_buffer("mask", torch.ones(2), persistent=False);',
    )


def test_runtime_state_is_registered_after_super_init_when_init_never_names_it() -> None:
    source = HEADER + textwrap.dedent("""\
        class A(nn.Module):
            def __init__(self):
                super().__init__()  # first
                self.cell = nn.Linear(2, 2)

            def forward(self, x):
                self.h = self.cell(x)
                return self.h
        """)
    code, hand = run(source, DeclareBuffer(cls(source), "h", line_of(source, "self.h =")))
    assert hand == []
    assert code == source.replace(
        "super().__init__()  # first\n",
        'super().__init__()  # first\n        self.register_buffer("h", None, persistent=False)\n',
    )


def test_a_list_of_modules_becomes_a_module_list_spelled_as_the_file_spells_torch_nn() -> None:
    source = "import torch.nn as tnn\n\n\n" + textwrap.dedent("""\
        class A(tnn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = []
                self.blocks.append(tnn.Linear(2, 2))
                self.heads = {"a": tnn.Linear(2, 2)}
        """)
    info = cls(source)
    edits = [
        WrapModules(info, "blocks", line_of(source, "self.blocks ="), "ModuleList"),
        WrapModules(info, "heads", line_of(source, "self.heads ="), "ModuleDict"),
    ]
    result = rewrite(source.encode(), FILE, edits)
    assert result.hand == []
    assert result.code.decode() == source.replace(
        "self.blocks = []", "self.blocks = tnn.ModuleList()"
    ).replace('{"a": tnn.Linear(2, 2)}', 'tnn.ModuleDict({"a": tnn.Linear(2, 2)})')


def test_the_mixin_goes_first_and_keeps_one_base_per_line() -> None:
    source = "import numpy as np\nimport torch\nfrom torch import nn\n\n\n" + textwrap.dedent("""\
        class A(
            nn.Linear,
        ):
            pass
        """)
    code, hand = run(source, MakeAutoreg(cls(source, bases=("torch",)), None))
    assert hand == []
    assert code == (
        "import autoreg\nimport numpy as np\nimport torch\nfrom torch import nn\n\n\n"
        "class A(\n    autoreg.AutoRegisterMixin,\n    nn.Linear,\n):\n    pass\n"
    )


@pytest.mark.parametrize(
    ("imports", "expected"),
    [
        ("import math\n\nimport torch\n", "import math\n\nimport autoreg\nimport torch\n"),
        ("import torch\nimport autoreg\n", "import torch\nimport autoreg\n"),
        ("from torch import nn\n", "import autoreg\nfrom torch import nn\n"),
        ("import abc_first\nimport torch\n", "import abc_first\nimport autoreg\nimport torch\n"),
    ],
    ids=["new-block", "already-imported", "before-from-imports", "sorted-in-its-block"],
)
def test_import_autoreg_goes_where_isort_puts_it(imports: str, expected: str) -> None:
    source = imports + "\n\nclass A(nn_Module):\n    pass\n"
    code, _ = run(source, MakeAutoreg(cls(source), 0))
    assert code == expected + "\n\nclass A(autoreg.Module):\n    pass\n"


def test_a_base_that_is_not_a_name_keeps_its_meaning_and_gets_the_mixin_first() -> None:
    source = "import torch\nfrom torch import nn\n\nBase = None\n\n\n" + (
        "class A(Base or nn.Module):\n    pass\n"
    )
    code, hand = run(source, MakeAutoreg(cls(source), 0))
    assert hand == []
    assert code == (
        "import autoreg\nimport torch\nfrom torch import nn\n\nBase = None\n\n\n"
        "class A(autoreg.AutoRegisterMixin, Base or nn.Module):\n    pass\n"
    )


def test_a_class_that_already_uses_autoreg_is_left_as_it_is() -> None:
    source = "import autoreg\n\n\nclass A(autoreg.Module):\n    pass\n"
    assert run(source, MakeAutoreg(cls(source), 0)) == (source, [])


# --- what is refused, and why ------------------------------------------------------------------

INIT = HEADER + "class A(nn.Module):\n    def __init__(self):\n"

REFUSED = {
    "loop": (
        INIT + "        super().__init__()\n        for i in range(2):\n"
        "            self.mask = torch.ones(i)\n",
        "stored in a loop",
    ),
    "nested-function": (
        INIT + "        super().__init__()\n\n        def build():\n"
        "            self.mask = torch.ones(2)\n\n        build()\n",
        "stored by a function nested in the method",
    ),
    "before-super-init": (
        INIT + "        self.mask = torch.ones(2)\n        super().__init__()\n",
        "stored before super().__init__(), where no buffer can be registered",
    ),
    "two-targets": (
        INIT + "        super().__init__()\n        self.mask, self.n = torch.ones(2), 2\n",
        "not stored by a plain `self.mask = value` statement",
    ),
    "setattr": (
        INIT + "        super().__init__()\n        name = 'mask'\n"
        "        setattr(self, name, torch.ones(2))\n",
        "stored through setattr(), under a computed name",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_a_store_it_cannot_rewrite_safely_is_listed_not_guessed(case: str) -> None:
    source, reason = REFUSED[case]
    lineno = line_of(source, "setattr(" if case == "setattr" else "self.mask")
    code, hand = run(source, RegisterBuffer(cls(source), "mask", lineno))
    assert code == source
    assert hand == [f"{lineno}: A.mask: {reason}"]


PROBED = (
    "first stored at run time, and A asks whether it exists (hasattr(), getattr(), or except "
    "AttributeError, contextlib.suppress(AttributeError); or hasattr() of a name it computes, "
    "which fix cannot read): registered in __init__, it would always exist"
)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            "    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x):\n        if not hasattr(self, 'h'):\n"
            "            self.h = x\n        return self.h\n",
            PROBED,
        ),
        (
            "    def forward(self, x):\n        self.h = x\n        return x\n",
            "first stored at run time, and A has no __init__ of its own that calls "
            "super().__init__() to register it in",
        ),
        *(
            (
                "    def __init__(self):\n        super().__init__()\n\n"
                "    def forward(self, x):\n        try:\n            h = self.h\n"
                f"        except {caught}:\n            h = x\n"
                "        self.h = x\n        return h\n",
                PROBED,
            )
            for caught in ("AttributeError", "(KeyError, AttributeError)", "Exception")
        ),
        (
            "    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x):\n"
            "        state = [getattr(self, n) for n in ('h',) if hasattr(self, n)]\n"
            "        self.h = x\n        return x\n",
            PROBED,
        ),
        (
            "    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x):\n"
            "        with contextlib.suppress(AttributeError):\n            x = x + self.h\n"
            "        self.h = x\n        return x\n",
            PROBED,
        ),
    ],
    ids=[
        "probed-with-hasattr",
        "no-init",
        "probed-with-try",
        "try-tuple",
        "try-exception",
        "computed-name",
        "suppress",
    ],
)
def test_runtime_state_it_cannot_declare_is_listed(body: str, reason: str) -> None:
    source = HEADER + "class A(nn.Module):\n" + body
    lineno = line_of(source, "self.h = x")
    code, hand = run(source, DeclareBuffer(cls(source), "h", lineno))
    assert (code, hand) == (source, [f"{lineno}: A.h: {reason}"])


@pytest.mark.parametrize(
    ("store", "use", "reason"),
    [
        (
            "[nn.Linear(2, 2)]",
            "self.blocks.sort(key=id)",
            "used with .sort(), which nn.ModuleList does not have",
        ),
        (
            "blocks",
            "pass",
            "not stored as a list or dict display, comprehension or list()/dict() "
            "call: wrapping it could change who else holds it",
        ),
    ],
    ids=["a-list-method", "a-shared-list"],
)
def test_a_list_of_modules_it_cannot_wrap_is_listed(store: str, use: str, reason: str) -> None:
    source = HEADER + textwrap.dedent(f"""\
        class A(nn.Module):
            def __init__(self, blocks):
                super().__init__()
                self.blocks = {store}
                {use}
        """)
    lineno = line_of(source, "self.blocks =")
    code, hand = run(source, WrapModules(cls(source), "blocks", lineno, "ModuleList"))
    assert (code, hand) == (source, [f"{lineno}: A.blocks: {reason}"])


def test_bases_it_cannot_read_are_listed() -> None:
    source = "import autoreg\n\nBASES = ()\n\n\nclass A(*BASES):\n    pass\n"
    code, hand = run(source, MakeAutoreg(cls(source), 0))
    assert code == source
    assert hand == [
        "6: A: held by A, whose class statement does not list the bases it has at run time"
    ]


def test_a_line_that_no_longer_holds_the_store_is_listed() -> None:
    source = INIT + "        super().__init__()\n        self.other = 1\n"
    lineno = line_of(source, "self.other")
    code, hand = run(source, RegisterBuffer(cls(source), "mask", lineno))
    assert code == source
    assert hand == [f"{lineno}: A.mask: not stored by a plain `self.mask = value` statement"]


def test_a_file_libcst_cannot_parse_is_listed_and_left_as_it_is() -> None:
    source = "import torch\n\n\nclass A(nn.Module:\n    pass\n"
    code, hand = run(source, MakeAutoreg(ClassInfo("A", FILE, 4, 5, ("module",)), 0))
    assert code == source
    assert hand == [
        "5: : this file could not be rewritten: LibCST cannot parse it (Syntax Error @ 5:1.); "
        "edit its classes by hand, as autoreg audit lists them"
    ]


# --- the plan: which class, which file --------------------------------------------------------


def _info(name: str, filename: str, start: int, end: int) -> ClassInfo:
    return ClassInfo(name, filename, start, end, ("module",))


def test_base_style_converts_the_class_whose_code_stores_it() -> None:
    child = _info("Child", "/p/a.py", 20, 30)
    base = _info("Base", "/p/b.py", 1, 10)
    site = Site("/p/b.py", 5, "Base.__init__", True, "tensor")
    plan = make_plan([Stray((child, base), "mask", Kind.TENSOR, (site,))], "base", "/p")
    assert plan.edits == {"/p/b.py": [MakeAutoreg(base, 0)]}
    assert plan.hand == []


@pytest.mark.parametrize(
    ("filename", "reason"),
    [
        (
            "/elsewhere/a.py",
            "stored by A, defined outside /p (autoreg fix edits only files "
            "under the current directory, never installed packages)",
        ),
        (
            "/p/.venv/site-packages/a.py",
            "stored by A, defined in /p/.venv/site-packages, "
            "where packages are installed: autoreg fix never edits them",
        ),
    ],
    ids=["outside-the-working-directory", "installed-under-it"],
)
def test_a_class_outside_the_project_is_listed_not_edited(filename: str, reason: str) -> None:
    info = _info("A", filename, 1, 10)
    site = Site(filename, 5, "A.__init__", True, "tensor")
    for style in ("base", "buffer"):
        stray = Stray((info,), "mask", Kind.TENSOR, (site,))
        plan = make_plan([stray], style, "/p", ["/p/.venv/site-packages"])  # type: ignore[arg-type]
        assert plan.edits == {}
        assert [(h.filename, h.name, h.reason) for h in plan.hand] == [(filename, "A.mask", reason)]


def test_buffer_style_lists_a_name_stored_as_a_tensor_and_as_something_else() -> None:
    source = INIT + (
        "        super().__init__()\n        self.scale = 1.0\n        self.scale = torch.ones(2)\n"
    )
    info = cls(source)
    first, second = line_of(source, "= 1.0"), line_of(source, "torch.ones")
    edit = RegisterBuffer(
        info, "scale", second, ((first, "other"), (second, "tensor")), ("__init__",)
    )
    code, hand = run(source, edit)
    assert hand == [
        f"{first}: A.scale: stores a value that is not a tensor here, where register_buffer takes "
        "only a tensor or None",
        f"{second}: A.scale: not rewritten: another store of scale in A, listed, stores what a "
        "buffer refuses (made a buffer here, the name would raise there)",
    ]
    assert code == source  # a name is rewritten whole or not at all


def test_writes_into_the_tensor_are_not_stores_of_the_attribute() -> None:
    source = INIT + (
        "        super().__init__()\n"
        "        self.mask = torch.zeros(4)\n"
        "        self.mask.requires_grad = False\n"
        "        self.mask[0::2] = 1.0\n"
        "        self.a, self.b = self.mask.chunk(2)\n"
    )
    lineno = line_of(source, "self.mask = ")
    code, hand = run(source, RegisterBuffer(cls(source), "mask", lineno, built=("__init__",)))
    assert hand == []
    assert code == source.replace(
        "self.mask = torch.zeros(4)",
        'self.register_buffer("mask", torch.zeros(4), persistent=False)',
    )


def test_a_store_that_did_not_run_and_may_be_a_weight_is_listed() -> None:
    source = INIT + (
        "        super().__init__()\n"
        "        if True:\n"
        "            self.w = torch.zeros(2)\n"
        "        else:\n"
        "            self.w = torch.zeros(2, requires_grad=True)\n"
    )
    lineno = line_of(source, "self.w = torch.zeros(2)")
    code, hand = run(source, RegisterBuffer(cls(source), "w", lineno, built=("__init__",)))
    assert hand == [
        f"{lineno + 2}: A.w: not run when the model was built, and the source does not say that "
        "it stores a tensor or None, all register_buffer takes",
        f"{lineno}: A.w: not rewritten: another store of w in A, listed, stores what a buffer "
        "refuses (made a buffer here, the name would raise there)",
    ]
    assert code == source
