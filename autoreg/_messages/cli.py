"""The command line's usage errors and reports."""

from __future__ import annotations

from typing import Final

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
