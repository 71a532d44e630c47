"""The messages of the contract: class definitions, strict and warn mode, conversions, export,
and the buffer containers.
"""

from __future__ import annotations

from typing import Final

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

UNSEEN_CLASS: Final = """\
autoreg never saw the class statement of {cls}: {base}.__init_subclass__ does not call \
super().__init_subclass__(**kwargs), so {cls}'s annotations, class keywords and construction \
methods are unknown to autoreg.
Call it at the end of {base}.__init_subclass__:
    super().__init_subclass__(**kwargs)"""

UNKNOWN_KEYWORD: Final = """\
class {cls} got the unknown class keyword(s) {names}.
autoreg's class keywords are persistent=, strict= and warn=, each True or False:
    class {cls}(autoreg.Module, persistent=True): ..."""

KEYWORD_NOT_BOOL: Final = """\
class {cls}: the class keyword {keyword}= must be True or False, got {value!r}."""

STRICT_AND_WARN: Final = """\
class {cls} sets both strict=True and warn=True; choose one.
strict=True raises on every undeclared tensor; warn=True registers it and warns once."""

INHERITED_INIT_UNDER_A_DECORATOR: Final = """\
{cls} is a @dataclass class that inherits {base}.__init__, and has no {hook} of its own: \
autoreg wraps an __init__ a class inherits when the class is created, before the decorator runs, \
and the decorator then wrote no {cls}.__init__ (its fields would be {base}'s, or never set). \
Define the hook in {cls}, building {base} (def {hook}(self): super().{builds}), and the \
decorator writes {cls}.__init__."""

# One line: it ends a traceback at the user's class statement, and the CLI prints it as it is.
BAD_MODE: Final = """\
AUTOREG_MODE={value!r} is not a mode autoreg knows. Valid values: {valid}. Leave it unset \
(or empty) to use each class's own keywords; the default is 'register'."""

# --- assignments (strict and warn mode) ----------------------------------------------------------

_EXPLICIT: Final = """\
Make it explicit, whichever fits (annotations go in the class body):
"""
_BUFFERS: Final = """\
    {default:<29}{name}: torch.Tensor
    a buffer in state_dict:      {name}: autoreg.Persistent
    a buffer not in state_dict:  {name}: autoreg.NonPersistent
"""
_CARRIED: Final = """\
    carried (runtime state):     {name}: autoreg.Carried
"""
_BY_HAND: Final = """\
    registered by hand:          self.{name} = nn.Buffer(value, persistent=False)
    a weight to train:           self.{name} = nn.Parameter(value)
    never registered or moved:   {name}: autoreg.Plain"""
# The fixes for a tensor autoreg would register (construction: a buffer first) or carry (run
# time: carried first); for a complex tensor no buffer, which .to(a real dtype) would cast.
FIXES_REGISTERED: Final = _EXPLICIT + _BUFFERS + _CARRIED + _BY_HAND
FIXES_CARRIED: Final = _EXPLICIT + _CARRIED + _BUFFERS + _BY_HAND
FIXES_COMPLEX: Final = (
    _EXPLICIT
    + "    carried, as it is now:       {name}: autoreg.Carried\n"
    + "    never registered or moved:   {name}: autoreg.Plain"
)
# What autoreg does with a complex tensor (construction and run time alike): it carries it.
_COMPLEX: Final = (
    "{verb}: .to() moves it and keeps it complex, never cast to a real dtype (as a buffer, "
    ".to(a real dtype) would drop its imaginary part); it is not in state_dict"
)
CARRY_COMPLEX: Final = _COMPLEX.format(verb="carry it")
CARRIED_COMPLEX: Final = _COMPLEX.format(verb="carried")

STRICT_UNDECLARED: Final = """\
cannot assign {value} to {cls}.{name}: {cls} is strict ({why}) and '{name}' is not declared.
Without strict, autoreg would {action}.
"""

WARN_UNDECLARED: Final = """\
{cls}.{name} = {value} was {action_past}.
"""

UNDETERMINED_OWNER: Final = """\
autoreg cannot tell whether {cls}.{name} = {value} is assigned by the code of {model} or by that \
of its base {framework}: both have the function {function}(), and nothing in the call tells which \
one runs. It keeps nn.Module's rules, as for the base's own state: a plain attribute that .to() \
leaves where it is.
To make it the model's, give {model} a function of its own instead of one it shares with \
{framework}, or assign the name first from the model's own code."""

GRAD_LEAF: Final = """\
{cls}.{name} = {value} is a leaf tensor that requires grad: it stays a plain attribute, as in \
nn.Module, so .to() and the optimizer never see it.
If it is a weight to train, wrap it: self.{name} = nn.Parameter(value); if it is not, detach it \
or create it with requires_grad=False; to keep it as it is, annotate {name}: autoreg.Plain."""

UNSURE_DERIVED: Final = """\
autoreg cannot tell whether {cls}.{name} = {value} is the weight prune, weight_norm or \
spectral_norm derive ({cls} has a parameter '{name}_orig', or '{name}_v' and '{name}_g', and no \
such utility's hook names '{name}'; compiled code cannot say who assigns): it stays a plain \
attribute, as in nn.Module, so .to() leaves it behind.
If it is no derived weight, assign it once outside torch.compile, or declare it (annotations go \
in the class body): {name}: torch.Tensor (a buffer), {name}: autoreg.Carried (runtime state) or \
{name}: autoreg.Plain (as it is)."""

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
    {name}: autoreg.Carried                   # carried as it is: moves, not in state_dict
    self.{name} = autoreg.BufferList([...])   # or autoreg.BufferDict({{...}}): buffers that move
    self.register_buffer("...", tensor)       # one buffer per tensor
    {name}: autoreg.Plain                     # never moved"""

WARN_CONTAINER: Final = """\
{cls}.{name} is a {kind} holding {count} unregistered tensor(s), e.g. {example}; autoreg carries \
it: its tensors move with .to() but are not in state_dict.
Make it explicit: annotate {name}: autoreg.Carried to carry it as now, use autoreg.BufferList / \
autoreg.BufferDict (buffers that move; with persistent=True, saved in state_dict), or annotate \
{name}: autoreg.Plain to keep it where it is."""

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

DELETED_NAME_DURING_EXPORT: Final = """\
cannot {action} {cls}.{name} = {value} while non-strict torch.export traces forward: '{name}' was \
deleted (del) before this store, and export restores only \
the attributes the module had before tracing: if this export began without '{name}', it would \
keep a fake tensor, and autoreg cannot tell. Store the new value without deleting the old one:
    self.{name} = ...   # in place of: del self.{name}; self.{name} = ...
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
