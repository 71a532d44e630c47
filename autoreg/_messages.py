"""Every message autoreg shows, in one place: errors, warnings, fixes and the command line's text.

Each is a module-level template, asserted whole by the tests. Every message about an assignment
names ``Class.attribute``, describes the offending value (``describe``) and shows the fix; tables
describe a tensor briefly (``brief``: ``float32[2, 3] cpu``).
"""

from __future__ import annotations

from typing import Any, Final

import torch

# --- describing values ---------------------------------------------------------------------------


def describe(value: Any) -> str:
    """``Tensor(shape=(4, 4), dtype=torch.float32, device='cpu')``; a non-tensor's type name."""
    if isinstance(value, torch.Tensor):
        grad = ", requires_grad=True" if value.requires_grad else ""
        if value.is_nested:  # no single shape
            return (
                f"NestedTensor({value.size(0)} tensors, dtype={value.dtype}, "
                f"device='{value.device}'{grad})"
            )
        return (
            f"{type(value).__name__}(shape={tuple(value.shape)}, dtype={value.dtype}, "
            f"device='{value.device}'{grad})"
        )
    return f"'{torch.typename(value)}'"


def brief(tensor: torch.Tensor) -> str:
    """``float32[16, 16] cpu``, with ``, requires grad`` when it does: a tensor in a table."""
    shape = f"nested({tensor.size(0)})" if tensor.is_nested else str(list(tensor.shape))
    text = f"{dtype_name(tensor.dtype)}{shape} {tensor.device}"
    return text + ", requires grad" if tensor.requires_grad else text


def dtype_name(dtype: torch.dtype | None) -> str:
    """``float32``: a dtype without its ``torch.`` prefix."""
    return str(dtype).removeprefix("torch.")


def describe_error(error: BaseException) -> str:
    """``TypeError: message`` (the type alone when the message is empty): an error quoted in
    another message."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def describe_object(value: object) -> str:
    """``the class Net`` for a class; the ``repr`` of anything else: what a target gave."""
    return A_CLASS.format(name=value.__qualname__) if isinstance(value, type) else repr(value)


A_CLASS: Final = "the class {name}"


# --- class definition (class keywords) -----------------------------------------------------------

MIXIN_AFTER_MODULE: Final = """\
class {cls} lists nn.Module before autoreg.AutoRegisterMixin in its bases, so \
nn.Module.__setattr__ runs first and the mixin never sees an assignment.
Put the mixin first:
    class {cls}(autoreg.AutoRegisterMixin, {bases}): ..."""

MIXIN_WITHOUT_MODULE: Final = """\
class {cls} uses autoreg.AutoRegisterMixin but is not an nn.Module subclass.
Mix it into a module class, before it:
    class {cls}(autoreg.AutoRegisterMixin, nn.Module): ...
or subclass autoreg.Module, which is exactly that."""

UNKNOWN_KEYWORD: Final = """\
class {cls} got the unknown class keyword(s) {names}.
autoreg's class keywords are persistent=, strict= and warn=, each True or False:
    class {cls}(autoreg.Module, persistent=True): ..."""

KEYWORD_NOT_BOOL: Final = """\
class {cls}: the class keyword {keyword}= must be True or False, got {value!r}."""

STRICT_AND_WARN: Final = """\
class {cls} sets both strict=True and warn=True; choose one.
strict=True raises on every undeclared tensor; warn=True registers it and warns once."""

BAD_MODE: Final = """\
AUTOREG_MODE={value!r} is not a mode autoreg knows.
Valid values: {valid}. Leave it unset (or empty) to use each class's own keywords; \
the default is 'register'."""

# --- assignments (strict and warn mode) ----------------------------------------------------------

_FIXES: Final = """\
Make it explicit, whichever fits (annotations go in the class body):
    {default:<29}{name}: torch.Tensor
    a buffer in state_dict:      {name}: autoreg.Persistent
    a buffer not in state_dict:  {name}: autoreg.NonPersistent
    registered by hand:          self.{name} = nn.Buffer(value, persistent=False)
    a weight to train:           self.{name} = nn.Parameter(value)
    never registered or moved:   {name}: autoreg.Plain"""

STRICT_UNDECLARED: Final = (
    """\
cannot assign {value} to {cls}.{name}: {cls} is strict ({why}) and '{name}' is not declared.
Without strict, autoreg would {action}.
"""
    + _FIXES
)

WARN_UNDECLARED: Final = (
    """\
{cls}.{name} = {value} was {action_past}.
"""
    + _FIXES
)

GRAD_LEAF: Final = """\
{cls}.{name} = {value} is a leaf tensor that requires grad: it stays a plain attribute, as in \
nn.Module, so .to() and the optimizer never see it.
If it is a weight to train, wrap it: self.{name} = nn.Parameter(value); if it is not, detach it \
or create it with requires_grad=False; to keep it as it is, annotate {name}: autoreg.Plain."""

NO_BUFFER_SLOT: Final = """\
{value} assigned to {cls}.{name} cannot become a buffer: '{name}' {where}, so .to() will leave \
it behind.
Rename the attribute, or move the class-level value into __init__; to keep it as it is, annotate \
{name}: autoreg.Plain."""

STRICT_CONTAINER: Final = """\
cannot assign a {kind} holding {count} unregistered tensor(s) to {cls}.{name}: {cls} is strict \
({why}).
For example {example}. Without strict, autoreg would carry the {kind}: its tensors move with .to() \
but are not in state_dict.
Make it explicit, whichever fits:
    self.{name} = autoreg.BufferList([...])   # or autoreg.BufferDict({{...}}): buffers that move
    self.register_buffer("...", tensor)       # one buffer per tensor
    {name}: autoreg.Plain                     # never moved"""

WARN_CONTAINER: Final = """\
{cls}.{name} is a {kind} holding {count} unregistered tensor(s), e.g. {example}; autoreg carries \
it: its tensors move with .to() but are not in state_dict.
Make it explicit with autoreg.BufferList / autoreg.BufferDict (buffers that move; with \
persistent=True, saved in state_dict), or annotate {name}: autoreg.Plain to keep it where it \
is."""

NOT_CONVERTED: Final = """\
{cls}.{name} = {value} could not be converted by .to() ({error}); it was left as it was, as \
nn.Module leaves every plain attribute.
A tensor stored inside torch.func.vmap or grad is a wrapper that dies with the transform: do not \
keep it on the module, or keep it detached from the transform."""

# --- torch.export --------------------------------------------------------------------------------

NEW_NAME_DURING_EXPORT: Final = """\
cannot {action} {cls}.{name} = {value} while non-strict torch.export traces forward: export \
restores the attributes the module had before tracing, not new ones, so '{name}' would keep a \
fake tensor and the module would compute with it afterwards.
Create '{name}' before exporting, whichever fits:
    self.{name} = torch.zeros(...)   # in __init__: a buffer; export records its updates
    module(example_input)            # run it once: '{name}' then exists and export restores it
or export with torch.export.export(..., strict=True), which leaves the module untouched."""

# --- BufferList and BufferDict -------------------------------------------------------------------

NOT_A_TENSOR: Final = """\
cannot put {value} into {cls} at {where}: a {cls} holds tensors only.
Use nn.ModuleList / nn.ModuleDict for modules; keep other values in a plain attribute."""

A_PARAMETER: Final = """\
cannot put {value} into {cls} at {where}: it is an nn.Parameter, and a buffer is not trained.
Use nn.ParameterList / nn.ParameterDict for weights to train, or put param.detach() for a copy \
that is not."""

PERSISTENCE_CLASH: Final = """\
cannot put nn.Buffer(..., persistent={given}) into {cls} at {where}: this {cls} was created with \
persistent={own}, which applies to every entry.
Put the plain tensor, or create the container with {cls}(..., persistent={given})."""

NOT_AN_ITERABLE_OF_TENSORS: Final = """\
{cls}.{method}() takes an iterable of tensors, got {value}.
To add one tensor, use {cls}.append(tensor)."""

KEY_NOT_A_STRING: Final = """\
BufferDict keys are strings (each names a buffer in state_dict), got {key!r} of type \
'{type}'. Use str(key)."""

KEY_NOT_A_NAME: Final = """\
BufferDict key {key!r} cannot name a buffer: {key!r} {where}.
Use another key."""

# --- find_unregistered: the fix each finding suggests, one line each -----------------------------

NOT_A_MODULE: Final = """\
{function}() takes an nn.Module instance, got {value}.{hint}"""

NOT_A_MODULE_CLASS_HINT: Final = """
Pass an instance, not the class: {function}({cls}(...))"""

FIX_BUFFER: Final = (
    "subclass autoreg.Module or register_buffer('{name}', ..., persistent=False); "
    "third-party class: autoreg.register_tensors"
)

FIX_FRAMEWORK: Final = (
    "kept by the code of a base class without autoreg (nn.Module's rules, row 4): convert it "
    "where it is used, or assign it from {cls}'s own code"
)

FIX_NO_SLOT: Final = (
    "'{name}' {where}: rename the attribute, or move the class-level value into __init__"
)

FIX_PARAMETER: Final = (
    "nn.Parameter(...) if it is a weight to train; if not, requires_grad=False or .detach()"
)

FIX_STRAY_PARAMETER: Final = (
    "register_parameter('{name}', ...): an nn.Parameter stored around nn.Module.__setattr__"
)

FIX_AUTOGRAD_RESULT: Final = (
    "an autograd result (e.g. an activation kept from forward): .to() leaves it until replaced; "
    "keep .detach() (autoreg carries it) or do not keep it"
)

FIX_CONTAINER: Final = "autoreg.{container}(...): buffers that move"

FIX_CONTAINER_OR_CARRY: Final = (
    "autoreg.{container}(...), or subclass autoreg.Module (it carries the {kind})"
)

FIX_NESTED: Final = (
    "subclass autoreg.Module (it carries nested containers), or one buffer per tensor"
)

FIX_DEVICE_CACHE: Final = (
    "a per-device cache: .to(dtype) leaves its entries in their old dtype and the model reads "
    "them; empty it in {cls}._apply (as timm's levit does), or do not cache"
)

FIX_MODULE_IN_CONTAINER: Final = (
    "nn.{container}: a module in a plain {kind} is invisible to .to(), state_dict() and "
    "parameters()"
)

FIX_CONTAINER_PARAMETERS: Final = (
    "nn.{container} if these are weights to train; if not, .detach() them"
)

# --- audit_forward: the fix each finding suggests, and why a pass stops --------------------------

FIX_RANDOM: Final = "device={ref}.device (or .to({ref}))"

FIX_RANDOM_LIKE: Final = "device={ref}.device (or torch.{op}_like({ref}) for {ref}'s shape)"

FIX_CREATED: Final = (
    "device={ref}.device (or .to({ref})); if it is the same at every call, make it once in "
    "__init__ as a buffer (autoreg.Module registers it)"
)

FIX_CREATED_SHAPED: Final = "device={ref}.device (or .to({ref}))"

FIX_NO_REFERENCE: Final = (
    "{what}= that of the model: the code here holds none of its tensors, so pass it one (t) "
    "and write {what}=t.{what}"
)

FIX_ENTERED: Final = (
    "made before forward (a global, a closure, a config, numpy): make it a buffer in __init__ "
    "(autoreg.Module registers it), or .to({ref}) here"
)

FIX_COPIED_BACK: Final = "keep it on the device: no .cpu() / .numpy() round trip, or .to({ref})"

FIX_ATTRIBUTE: Final = "{path} is a plain attribute .to() leaves behind: {fix}"

FIX_PROMOTES: Final = (
    "dtype={ref}.dtype (or .to({ref})): this {stray} tensor turns {op} on {low} into {result}"
)

FIX_RAISES: Final = "dtype={ref}.dtype (or .to({ref})): {op} rejects {stray} next to {low}"

FIX_STORED: Final = (
    "state forward stores where .to() leaves it: subclass autoreg.Module (it carries it), or "
    "in __init__: self.register_buffer('{name}', None, persistent=False)"
)

FIX_STORED_CONTAINER: Final = (
    "a {kind} of tensors forward stores where .to() leaves them: subclass autoreg.Module (it "
    "carries the {kind}), or one non-persistent buffer per tensor"
)

BAD_FORWARD_MODE: Final = (
    "audit_forward() got mode={value!r}: use 'train', 'eval' or 'both', or leave it out to audit "
    "the mode the model is in"
)

OP_AT_LINE: Final = "{op} (line {lineno})"  # an operation on another line of the same file

OP_AT: Final = "{op} ({where})"  # an operation in another file

FORWARD_FINDING: Final = """\
{where}: {finding.kind} stray {finding.tensor}, first mixed in by {op}: {finding.source}
    fix: {finding.fix}"""

STORED_FINDING: Final = """\
{where}: stored {finding.tensor} in {finding.class_name}.{finding.attribute}: {finding.source}
    fix: {finding.fix}"""

NO_STRAY_BEFORE: Final = "No stray found before."

STRAYS_BEFORE: Final = "Found before:\n{found}"

CANNOT_COPY: Final = """\
audit_forward() cannot deep-copy {cls}: {error}
The audit runs a copy, so that the model given is left as it was: make {cls} deep-copyable \
(copy.deepcopy)."""

CANNOT_COPY_ATTRIBUTE: Final = """\
audit_forward() cannot deep-copy {cls}: {owner}.{name} = {value} raised {error}
The audit runs a copy, so that the model given is left as it was. Make {owner}.{name} \
deep-copyable (give its class a __deepcopy__), or keep it out of the model: a module-level \
object, or an argument of forward."""

CANNOT_COPY_INPUTS: Final = """\
audit_forward() cannot deep-copy the inputs: {error}
The audit runs on copies, so that the inputs given are left as they were."""

FORWARD_RAISED: Final = """\
the forward of {cls} raised on the meta device, at {where}: {error}
The audit runs one forward on meta, which has no values: an operation meta cannot run \
(nonzero, a shape that depends on values) stops it. {found}"""

FORWARD_RAISED_GUESSED: Final = """\
the forward of {cls} raised on the meta device, at {where}: {error}
The audit runs one forward on meta, which has no values: the forward read {guessed} value(s) \
it could not compute from the inputs alone, and got stand-ins (False, 1), which may be why. \
{found}"""

FORWARD_OWN_ERROR: Final = """\
the forward of {cls} raised at {where}: {error}
This is an error of the forward itself, not a gap of the audit: it raises on the CPU with real \
values too. Check the inputs given (their number, shapes and dtypes) and the code at that line, \
then audit again. {found}"""

LOW_PRECISION_RAISED: Final = """\
the forward of {cls} raised once converted to {low}, at {where}: {error}
If {cls} does not run in {low}, skip the dtype pass: audit_forward(..., low_precision=None). \
{found}"""

# --- the command line ----------------------------------------------------------------------------

CLI_DESCRIPTION: Final = "autoreg's migration tools."

AUDIT_HELP: Final = "list the tensors of a model that .to() would leave behind"

AUDIT_DESCRIPTION: Final = (
    "Build the model that TARGET names and list every tensor reachable from it that .to() would "
    "leave behind, with a fix for each. Exit status: 0 clean, 1 findings, 2 usage error."
)

AUDIT_TARGET_HELP: Final = (
    "package.module:factory - a module class, or a zero-argument callable returning a module "
    "(or, for --forward, (model, args) or (model, args, kwargs))"
)

AUDIT_JSON_HELP: Final = "print the findings as JSON, every field in full"

AUDIT_FORWARD_HELP: Final = (
    "also run one forward pass on the meta device and list the tensors it makes, takes or "
    "stores that stay behind when the model moves; TARGET then returns (model, args) or "
    "(model, args, kwargs)"
)

AUDIT_MODE_HELP: Final = (
    "with --forward: run the forward in {mode} mode (default: the mode the model is in; "
    "--train --eval: both, in turn)"
)

MODE_WITHOUT_FORWARD: Final = (
    "--train and --eval choose the mode of the forward pass: add --forward"
)

MALFORMED: Final = """\
{target!r} is not a target: write package.module:factory, e.g. \
{prog} audit my_project.model:build"""

FILE_TARGET: Final = (
    "{target!r} names a file; a target names a module, with dots: {dotted} (run from the "
    "directory its package is in)"
)

NO_MODULE: Final = "cannot import {module!r}: {error} (is it importable from {cwd}?)"

IMPORT_RAISED: Final = "importing {module!r} raised {error}"

NO_NAME: Final = "{owner} has no attribute {name!r}"

NOT_CALLABLE: Final = (
    "{target} is {value}: expected a module class or a function returning a module"
)

FACTORY_RAISED: Final = "{target}() raised {error}"

NOT_A_FORWARD: Final = (
    "{target}{called} {value}: with --forward, expected (model, args) or (model, args, kwargs), "
    "e.g. return Net(), (torch.ones(2, 3),)"
)

FORWARD_FAILED: Final = "cannot audit the forward of {target}: {error}"

CLEAN: Final = "Nothing in {cls} would be left behind by .to()."

SUMMARY: Final = "{count} {tensors} in {cls} would be left behind by .to()."

FORWARD_CLEAN: Final = "Nothing in the forward of {cls} ({mode} mode) stays behind when it moves."

FORWARD_SUMMARY: Final = (
    "{count} {strays} in the forward of {cls} ({mode} mode): tensors it makes, takes or stores "
    "that stay behind when the model moves."
)

FACTORY_NOT_A_MODULE: Final = "{target}() returned {value}, not an nn.Module"

RAISED_AT: Final = "{error} (at {where})"  # an error of the user's code, at the user's line

A_MODULE_INSTANCE: Final = "the module {cls}(...)"

CALLED: Final = "() returned"  # NOT_A_FORWARD: what a factory returned ...

NOT_CALLED: Final = " is"  # ... or what a target names

USAGE_ERROR: Final = "{prog} {command}: error: {message}"

# --- autoreg fix ---------------------------------------------------------------------------------
# A hand edit is printed as "file:line: Class.attribute: <reason>" and, indented, the edit to make.

FIX_HELP: Final = "rewrite the classes that leave tensors behind (a diff; --write applies it)"

FIX_DESCRIPTION: Final = (
    "Build and audit each TARGET, then rewrite the source of each class with findings (files "
    "under the current directory only), keeping every other line as it is. Without --write: "
    "print the diff; exit 1 if it is not empty, 0 if nothing needs changing. With --write: apply "
    "it, re-audit in a fresh process; exit 0 if clean, 1 if not. Exit 2: usage error."
)

FIX_TARGET_HELP: Final = (
    "package.module:factory - a module class or a zero-argument callable returning a module, or "
    "(model, args) / (model, args, kwargs) to audit the forward too"
)

FIX_STYLE_HELP: Final = (
    "base (the default): subclass autoreg.Module (or put autoreg.AutoRegisterMixin first); "
    "buffer: plain PyTorch, register_buffer(..., persistent=False) and nn.ModuleList / "
    "nn.ModuleDict, no dependency on autoreg"
)

FIX_WRITE_HELP: Final = "rewrite the files, then re-audit"

FIX_NO_LIBCST: Final = (
    "autoreg fix rewrites source with LibCST, which is not installed: "
    'pip install "torch-autoreg[fix]"'
)

FIX_HAND_GRAD: Final = (
    "requires grad: a weight to train wants nn.Parameter, a constant does not, and only you know "
    "which"
)

FIX_HAND_GRAD_EDIT: Final = (
    "self.{attribute} = nn.Parameter(...) if it is a weight to train; if not, create it with "
    "requires_grad=False (or .detach() it)"
)

FIX_HAND_AUTOGRAD: Final = (
    "an autograd result (it requires grad and is not a leaf), stored while the model is built"
)

FIX_HAND_AUTOGRAD_EDIT: Final = "store it detached (value.detach()), or compute it in forward"

FIX_HAND_PARAMETER: Final = "an nn.Parameter stored around nn.Module.__setattr__"

FIX_HAND_PARAMETER_EDIT: Final = 'self.register_parameter("{attribute}", ...)'

FIX_HAND_NO_SLOT: Final = "cannot be a buffer: '{attribute}' {where}"

FIX_HAND_NO_SLOT_EDIT: Final = (
    "remove the class-level value (or rename the attribute), then run autoreg fix again"
)

FIX_HAND_DEVICE_CACHE: Final = "a per-device cache: moving its entries would keep their device keys"

FIX_HAND_DEVICE_CACHE_EDIT: Final = (
    "empty it in {cls}._apply (as timm's levit does), or do not cache"
)

FIX_HAND_FINDING: Final = "left behind by .to() although {cls} uses autoreg"

FIX_HAND_MODULES_BASE: Final = (
    "a plain {container} of modules: .to(), state_dict() and parameters() never see them, "
    "with or without autoreg (--style buffer writes this edit)"
)

FIX_HAND_MODULES_AS_IS: Final = (
    "a {container} of modules that an nn.ModuleList / nn.ModuleDict cannot hold as it is "
    "(a tuple, a key that is not a name, or an item that is not a module)"
)

FIX_HAND_MODULES_EDIT: Final = (
    "self.{attribute} = nn.{container}(...): their parameters and buffers then move, train and "
    "join state_dict()"
)

FIX_HAND_CONTAINER: Final = "a {container} of tensors, and plain PyTorch has no buffer container"

FIX_HAND_CONTAINER_EDIT: Final = (
    'one buffer per tensor (self.register_buffer("{attribute}_0", t, persistent=False), ...), '
    "or keep autoreg: autoreg.BufferList / autoreg.BufferDict, or --style base"
)

FIX_HAND_MIXED: Final = (
    "stored both as a tensor and as another value while the model is built, and "
    "register_buffer takes only a tensor or None"
)

FIX_HAND_MIXED_EDIT: Final = (
    'self.register_buffer("{attribute}", value, persistent=False) where the tensor is stored; '
    "keep the other value under another name"
)

FIX_HAND_UNSEEN: Final = (
    "never seen being stored while the model was built (written around "
    "nn.Module.__setattr__, or before autoreg fix ran)"
)

FIX_HAND_UNSEEN_EDIT: Final = (
    'self.register_buffer("{attribute}", value, persistent=False) where it is stored'
)

FIX_HAND_HELPER: Final = "stored by {function}(), outside the class"

FIX_HAND_HELPER_EDIT: Final = (
    'register it where it is stored: module.register_buffer("{attribute}", value, '
    "persistent=False) in {function}(), or self.register_buffer(...) in {cls}.__init__"
)

FIX_HAND_NO_SOURCE: Final = "held by {cls}, whose source file cannot be read"

FIX_HAND_NO_SOURCE_EDIT: Final = (
    "subclass autoreg.Module where {cls} is defined, or call autoreg.register_tensors(model) "
    "once the model is built"
)

FIX_HAND_NOT_EDITABLE: Final = (
    "stored by {cls}, defined outside {root} (autoreg fix edits only files under the current "
    "directory, never installed packages)"
)

FIX_HAND_LIBRARY: Final = (
    "stored by {cls}, defined in {library}, where packages are installed: autoreg fix never "
    "edits them"
)

FIX_HAND_NOT_EDITABLE_EDIT: Final = (
    "call autoreg.register_tensors(model) once the model is built, or run autoreg fix from the "
    "directory that holds the class"
)

FIX_HAND_SETATTR: Final = "stored through setattr(), under a computed name"

FIX_HAND_SETATTR_EDIT: Final = (
    "self.register_buffer(name, value, persistent=False) in place of setattr(self, name, value)"
)

FIX_HAND_LOOP: Final = "stored in a loop"

FIX_HAND_NESTED: Final = "stored by a function nested in the method"

FIX_HAND_NOT_ASSIGN: Final = "not stored by a plain `self.{attribute} = value` statement"

FIX_HAND_BEFORE_INIT: Final = "stored before super().__init__(), where no buffer can be registered"

FIX_HAND_REGISTER_EDIT: Final = (
    'self.register_buffer("{attribute}", value, persistent=False), after super().__init__()'
)

FIX_HAND_STALE: Final = (
    "stored at a line whose source does not match the code that ran (edited since it was imported?)"
)

FIX_HAND_STALE_EDIT: Final = "run autoreg fix again"

FIX_HAND_UNPARSED: Final = (
    "this file could not be rewritten: LibCST cannot parse it ({error}); edit its classes by "
    "hand, as autoreg audit lists them"
)

FIX_HAND_NO_INIT: Final = (
    "first stored at run time, and {cls} has no __init__ of its own that calls "
    "super().__init__() to register it in"
)

FIX_HAND_PROBED: Final = (
    "first stored at run time, and {cls} asks hasattr()/getattr() for it: registered in "
    "__init__, it would always exist"
)

FIX_HAND_DECLARE_EDIT: Final = (
    'self.register_buffer("{attribute}", None, persistent=False) in {cls}.__init__, after '
    "super().__init__(), and test `self.{attribute} is None` where it is probed"
)

FIX_HAND_WRAP_SHAPE: Final = (
    "not stored as a list or dict display, comprehension or list()/dict() call: wrapping it "
    "could change who else holds it"
)

FIX_HAND_WRAP_METHOD: Final = "used with .{method}(), which nn.{container} does not have"

FIX_HAND_BASES: Final = (
    "held by {cls}, whose class statement does not list the bases it has at run time"
)

FIX_HAND_BASES_EDIT: Final = (
    "subclass autoreg.Module instead of nn.Module, or put autoreg.AutoRegisterMixin first in the "
    "bases of {cls}"
)

FIX_HAND_STORED: Final = "stored by forward, where .to() leaves it"

FIX_FORWARD_STRAYS: Final = (
    "note: forward also makes {count} {tensors} on the default device or dtype, which autoreg "
    "fix does not rewrite: autoreg audit --forward lists them with their fixes."
)

FIX_NOTHING: Final = "autoreg fix: nothing to rewrite."

FIX_WOULD_CHANGE: Final = (
    "autoreg fix: {count} {files} would change (the diff above); --write applies it."
)

FIX_WROTE: Final = "autoreg fix: rewrote {files}."

FIX_HAND_HEADER: Final = "{count} left for you to edit (autoreg fix does not guess these):"

FIX_GAINS_STATE: Final = (
    "note: {name} becomes nn.{container}: its modules' parameters and buffers join parameters() "
    "and state_dict()."
)

FIX_REAUDIT: Final = "autoreg fix: re-auditing in a fresh process: {command}"

FIX_CLEAN: Final = "autoreg fix: {target} is now clean: .to() leaves nothing behind."

FIX_NOT_CLEAN: Final = (
    "autoreg fix: {target} still leaves tensors behind (the audit above); edit them as listed."
)

FIX_REAUDIT_FAILED: Final = "the re-audit of {target} failed (exit status {code}):\n{output}"
