"""The fixes the audits suggest, one line each, and why a forward audit stops."""

from __future__ import annotations

from typing import Final

# --- find_unregistered: the fix each finding suggests, one line each -----------------------------

NOT_A_MODULE: Final = """\
{function}() takes an nn.Module instance, got {value}.{hint}"""

# A TorchScript module, given to an audit function ("find_unregistered() got") or built by a
# command line target ("'pkg.mod:build' gives").
SCRIPTED_MODULE: Final = """\
{what} a TorchScript module ({cls}, from torch.jit.script or torch.jit.trace), which autoreg \
cannot read: its attributes live in TorchScript, where a tensor .to() leaves behind cannot be \
told from a buffer. Audit the module before scripting it (a factory that returns it \
unscripted)."""

NOT_A_MODULE_CLASS_HINT: Final = """
Pass an instance, not the class: {function}({cls}(...))"""

FIX_BUFFER: Final = (
    "subclass autoreg.Module or register_buffer('{name}', ..., persistent=False); "
    "third-party class: autoreg.register_tensors"
)

FIX_COMPLEX: Final = (
    "a complex tensor: as a buffer, .to(dtype) would cast it to a real dtype and drop its "
    "imaginary part (nn.Module's rule); subclass autoreg.Module (it carries it, kept complex), "
    "or keep it a plain attribute and move it where it is used: .to(x.device)"
)

FIX_FRAMEWORK: Final = (
    "kept by the code of a base class without autoreg (nn.Module's rules, row 4): convert it "
    "where it is used, or assign it from {cls}'s own code"
)

FIX_AROUND_SETATTR: Final = (
    "stored around __setattr__ (a __dict__ write), which autoreg never sees: assign it, "
    "self.{name} = ..., and autoreg registers or carries it"
)

FIX_CLASS_ATTRIBUTE: Final = (
    "defined on the class {owner}, which .to() never converts (it converts what each instance "
    "holds): assign it in __init__ instead (self.{name} = ... on autoreg.Module, or "
    "register_buffer('{name}', ..., persistent=False))"
)

FIX_CLASS_CONTAINER: Final = (
    "defined on the class {owner}, which .to() never converts (it converts what each instance "
    "holds): assign it in __init__ instead (self.{name} = ... on autoreg.Module, which carries "
    "a {kind}, or autoreg.BufferList / autoreg.BufferDict)"
)

FIX_NO_SLOT: Final = (
    "'{name}' {where}: rename the attribute, or move the class-level value into __init__"
)

FIX_PARAMETER: Final = (
    "nn.Parameter(...) if it is a weight to train; if not, requires_grad=False or .detach()"
)

FIX_PARAMETER_VIEW: Final = (
    "a view of the parameter {parameter}, kept: .to() converts {parameter} in place and leaves "
    "the view on its old values; take the view where it is used"
)

FIX_ALIAS: Final = (
    "{relation} the {kind} {name}: .to() gives {name} new values and leaves this one on the old "
    "(a buffer of its own would no longer follow {name}); read {name} where it is used"
)

FIX_SHARED: Final = (
    "{relation} {name}, which .to() leaves behind too: made two buffers (or carried apart), they "
    "would be converted apart and stop sharing their values; keep one on the module (a buffer) "
    "and take the other from it where it is used"
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

FIX_KEPT_PLAIN: Final = (
    "declared autoreg.Plain, which .to() leaves where it is: move it where forward uses it "
    "(self.{name}.to(x.device)), or drop the declaration"
)

FIX_NAMED_TUPLE: Final = (
    "subclass autoreg.Module (it carries the {kind}, fields and all), or one buffer per field, "
    "with the {kind} built where it is read (autoreg.BufferList would lose the field names)"
)

FIX_NAMED_TUPLE_AUTOREG: Final = (
    "one buffer per field, with the {kind} built where it is read (autoreg.BufferList would "
    "lose the field names)"
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

FIX_IN_OBJECT: Final = (
    "a tensor inside a {holder} object, which .to() never reaches: keep it on the module instead "
    "(a buffer, or an attribute of an autoreg.Module), and read it from there"
)

FIX_NUMPY: Final = (
    "a numpy array, which .to() never moves: if forward computes with the array, make it a "
    "tensor (torch.as_tensor) kept as a buffer, and use that; if forward only takes numbers "
    "out of it (a schedule read per step, which a buffer's .half() would round) or never "
    "reads it (statistics kept for reference), leave it"
)

FIX_OWN_TO: Final = (
    "{fix}; {cls}'s own to() ({where}) may move it, but .cuda(), .double() and a parent's .to() "
    "do not"
)

FIX_OWN_APPLY_UNREAD: Final = (
    "{fix}; {cls}'s own _apply() may move it: the audit could not tell ({why})"
)
OWN_APPLY_TOO_LARGE: Final = "the module holds more than {limit:,} elements, too many to copy"
OWN_APPLY_FAILED: Final = "a deep copy moved to the meta device failed: {error}"

FIX_CONTAINER_PARAMETERS: Final = (
    "nn.{container} if these are weights to train; if not, .detach() them"
)

# --- audit_forward: the fix each finding suggests, and why a pass stops --------------------------

FIX_RANDOM: Final = "{fix} (or .to({ref}))"

FIX_RANDOM_LIKE: Final = "{fix} (or torch.{op}_like({ref}) for {ref}'s shape)"

FIX_CREATED: Final = (
    "{fix} (or .to({ref})); if it is the same at every call, make it once in __init__ as a "
    "buffer (autoreg.Module registers it)"
)

FIX_CREATED_SHAPED: Final = "{fix} (or .to({ref}))"

FIX_DTYPE: Final = "dtype={ref}.dtype (or .to({ref}))"

# Floats computed from integers (timesteps times frequencies) are converted where they meet the
# model, not where they are computed: bfloat16 holds integers exactly only up to 256, and a
# sinusoidal embedding of timesteps to 999 computed in it is off by up to 1.9 (0.002 so).
FIX_COMPUTED_DTYPE: Final = (
    "floating values computed from integers take the default dtype: keep them in it (bfloat16 "
    "holds integers exactly only up to 256) and convert what they give where it meets the "
    "model, at {op}: .to({ref}.dtype)"
)

FIX_DTYPE_WRITTEN: Final = "dtype={ref}.dtype, not the dtype written here (or .to({ref}))"

FIX_CAST: Final = "cast to {ref}.dtype, not to {stray}: .to({ref}.dtype)"

FIX_CAST_BACK: Final = (
    "cast to {stray} on purpose, it meets tensors of the model at {op}, which refuses the mix: "
    "cast those to {stray} there too, or cast it back first, "
    ".type_as({ref})"
)

FIX_NO_REFERENCE: Final = (
    "{what}= that of the model: the code here holds none of its tensors, so pass it one and "
    "write {what}=<that tensor>.{what}"
)

FIX_COMPUTED_NO_REFERENCE: Final = (
    "floating values computed from integers take the default dtype: keep them in it (bfloat16 "
    "holds integers exactly only up to 256) and convert what they give where it meets the "
    "model, at {op}: .to(<a tensor of the model there>.dtype)"
)

# A tensor computed with a cast on purpose, in its dtype (frequencies times ``t.float()``): the
# cast decides the dtype; the tensor in the model's dtype changes nothing and loses precision.
FIX_JOINED: Final = (
    "computed with a cast to {stray} on purpose, which gives the result {stray} whatever its "
    "own dtype: keep it {stray}, and convert the result where it meets the model, at {op}: "
    ".to(<a tensor of the model there>.dtype)"
)

FIX_NO_REFERENCE_DTYPE: Final = (
    "the code here holds none of the model's tensors: convert what it gives where it meets the "
    "model, at {op}: .to(<a tensor of the model there>.dtype)"
)

FIX_ENTERED: Final = (
    "made before forward (a global, a closure, a config, numpy): make it a buffer in __init__ "
    "(autoreg.Module registers it), or .to({ref}) here"
)

FIX_COPIED_BACK: Final = (
    "keep it on the model's device: no .cpu() / .numpy() round trip, or .to({ref})"
)

FIX_MOVED: Final = ".to({ref}), which gives it the dtype of {ref} too, not only its device"

FIX_NUMPY_CALL: Final = ".cpu() before .numpy(): .numpy() refuses a tensor on a GPU"

FIX_DEVICE_ATTRIBUTE: Final = (
    "{attribute} is the device the model was built on, which .to() does not change: {fix}"
)

FIX_ATTRIBUTE: Final = "{path} is a plain attribute .to() leaves behind: {fix}"

FIX_HELD: Final = "{path} is left behind by .to(): {fix}"

WHY_DEVICE: Final = "{op} meets it next to the model's tensors"

RETURNED: Final = "return"  # the operation named for a stray the output hands to the caller

WHY_RETURNED: Final = (
    "it is returned beside the model's tensors ({where}), and the caller meets them together"
)

WHY_PROMOTES: Final = "this {stray} tensor turns {op} on {low} into {result}"

WHY_RAISES: Final = "{op} rejects {stray} next to {low}"

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

OP_HERE: Final = "{op}, on this line"  # in a fix: the operation on the stray's own line

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

COPY_IS_ITSELF: Final = (
    "{cls}'s deep copy is the module itself (its __deepcopy__ gives back self): the audits "
    "convert a copy of the model, which would convert yours. Give {cls} a __deepcopy__ that "
    "copies its parameters, or audit the model without it"
)

CANNOT_COPY_INPUTS: Final = """\
audit_forward() cannot deep-copy the inputs: {error}
The audit runs on copies, so that the inputs given are left as they were."""

THE_FORWARD_OF: Final = "the forward of {cls}"

STEP_OF: Final = "the step {step} of {cls}"

FORWARD_OWN_ERROR: Final = """\
{what} raises at {where}: {error}
It raises on the CPU without the audit too (checked): an error of the model or of its inputs, \
not of the audit. Check the inputs given (their number, shapes and dtypes) and the code at that \
line, then audit again. (Both runs use a deep copy of the model: if the model itself runs, its \
copy.deepcopy is what raises.) {found}"""

FORWARD_AUDIT_LIMIT: Final = """\
the audit cannot follow {what} at {where}: {error}
Without the audit, it runs on the CPU (checked): a limit of the audit, not an error of the model; \
please report it. {found}"""

FORWARD_RAISED_META: Final = """\
{what} raised at {where}: {error}
{cls} is on the meta device, which has no values: an operation that needs them (nonzero, a \
shape that depends on values) stops the audit there. Build the model on the CPU to audit it \
with its values. {found}"""

FORWARD_RAISED_META_GUESSED: Final = """\
{what} raised at {where}: {error}
{cls} is on the meta device, which has no values: the forward read {guessed} value(s) it could \
not compute from the inputs alone, and got stand-ins (False, 1), which may be why. Build the \
model on the CPU to audit it with its values. {found}"""

LOW_PRECISION_RAISED: Final = """\
{what} raises once converted to {low}, at {where}: {error}
It does without the audit too (checked), on the CPU. If {cls} does not run in {low}, skip the \
dtype pass: audit_forward(..., low_precision=None), or --low-precision none on the command \
line. {found}"""

CANNOT_CONVERT: Final = """\
{what} is not audited in {low}: {cls}.to({move}) raises {error}
An error of the model's own to(), not of the audit: the audit converts its copy of the model as \
a user would, with {cls}'s own to(). If {cls} does not run in {low}, skip the dtype pass: \
audit_forward(..., low_precision=None), or --low-precision none on the command line. {found}"""

LOW_PRECISION_LIMIT: Final = """\
the audit cannot follow {what} once converted to {low}, at {where}: {error}
Without the audit, it runs in {low} on the CPU (checked): a limit of the audit; please report \
it. To audit the rest, skip the dtype pass: audit_forward(..., low_precision=None), or \
--low-precision none on the command line. {found}"""
