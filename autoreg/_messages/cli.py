"""The command line's usage errors and reports."""

from __future__ import annotations

from typing import Final

# --- the command line ----------------------------------------------------------------------------

CLI_DESCRIPTION: Final = "autoreg's migration tools."

AUDIT_HELP: Final = "list the tensors of a model that .to() would leave behind"

AUDIT_DESCRIPTION: Final = (
    "Build the model that TARGET names and list every tensor reachable from it that .to() would "
    "leave behind, with a fix for each. Exit status: 0 when everything was audited and nothing "
    "found, 1 when something was found or could not be audited, 2 for a usage error or a target "
    "that cannot be built."
)

AUDIT_TARGET_HELP: Final = (
    "package.module:factory - a module class, or a zero-argument callable returning a module "
    "(or, for --forward, (model, args) or (model, args, kwargs))"
)

AUDIT_JSON_HELP: Final = "print the findings as JSON, every field in full"

AUDIT_FORWARD_HELP: Final = (
    "also run one forward pass (on the CPU) and list the tensors it makes, takes or stores that "
    "stay behind when the model moves; TARGET then returns (model, args) or (model, args, kwargs)"
)

AUDIT_STEP_HELP: Final = (
    "package.module:function - audit function(model, *args, **kwargs) instead of the forward: "
    "a loss, or a training step that makes its own optimizer (implies --forward)"
)

AUDIT_MODE_HELP: Final = (
    "with --forward or --step: run the model in {mode} mode (default: the mode the model is in; "
    "--train --eval: both, in turn)"
)

AUDIT_LOW_PRECISION_HELP: Final = (
    "with --forward or --step: the dtype of the second pass, which finds what stays float32 "
    "when the model is converted (default: bfloat16); none skips it, for a model that never runs "
    "in a low precision (complex kernels)"
)

FIX_LOW_PRECISION_HELP: Final = (
    "the dtype of the forward audit's second pass (default: bfloat16); none skips it, for a "
    "model that never runs in a low precision"
)

LOW_PRECISION_WITHOUT_FORWARD: Final = (
    "--low-precision chooses the dtype of the forward pass's second run: add --forward (or --step)"
)

SKIP_LOW_PRECISION: Final = "{reason}; --low-precision none skips the {low} pass"

NO_LOW_PRECISION: Final = (
    "Not run in a low precision: a dtype left behind by .half() or .to(torch.bfloat16) is not "
    "audited."
)

MODE_WITHOUT_FORWARD: Final = (
    "--train and --eval choose the mode of the forward pass: add --forward (or --step)"
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

NOT_A_FUNCTION: Final = "{target} is {value}: --step expects a function, called as f(model, *args)"

FACTORY_RAISED: Final = "{target}() raised {error}"

NOT_A_FORWARD: Final = (
    "{target}{called} {value}: with --forward, expected (model, args) or (model, args, kwargs), "
    "e.g. return Net(), (torch.ones(2, 3),)"
)

FORWARD_FAILED: Final = "cannot audit the forward of {target}: {error}"

CLEAN: Final = "Nothing in {cls} would be left behind by .to()."

SUMMARY: Final = "{count} {tensors} in {cls} would be left behind by .to()."

SUMMARY_IN: Final = "{count} {tensors} in {inner}, in {cls}, would be left behind by .to()."

SUMMARY_CLASSES: Final = (
    "{count} {tensors} in {classes} classes of {cls} would be left behind by .to()."
)

MORE: Final = " (+{count})"  # the same attribute in more instances of its class

FIX_LINE: Final = "fix: {fix}"

FIX_LINE_FOR: Final = "fix ({names}): {fix}"

SEE_ABOVE: Final = "{cls}.{attribute} is left behind by .to(): its fix is above"

FORWARD_CLEAN: Final = "Nothing in {what} ({mode} mode) stays behind when it moves."

FORWARD_SUMMARY: Final = (
    "{count} {strays} in {what} ({mode} mode): tensors it makes, takes or stores that stay "
    "behind when the model moves."
)

NOT_AUDITED: Final = "Not audited: {reason}"

FACTORY_NOT_A_MODULE: Final = "{target}() returned {value}, not an nn.Module"

RAISED_AT: Final = "{error} (at {where})"  # an error of the user's code, at the user's line

A_MODULE_INSTANCE: Final = "the module {cls}(...)"

CALLED: Final = "() returned"  # NOT_A_FORWARD: what a factory returned ...

NOT_CALLED: Final = " is"  # ... or what a target names

USAGE_ERROR: Final = "{prog} {command}: error: {message}"
