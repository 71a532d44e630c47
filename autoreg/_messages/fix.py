"""What ``autoreg fix`` says: its help, its summary, and the hand edits it lists."""

from __future__ import annotations

from typing import Final

# --- autoreg fix ---------------------------------------------------------------------------------
# A hand edit is printed as "file:line: Class.attribute: <reason>" and, indented, the edit to make.

FIX_HELP: Final = "rewrite the classes that leave tensors behind (a diff; --write applies it)"

FIX_DESCRIPTION: Final = (
    "Build and audit each TARGET, then rewrite the source of each class with findings (files "
    "under the current directory only), keeping every other line as it is. Without --write: "
    "print the diff. With --write: apply it, then re-audit in a fresh process. Exit 0: "
    "everything audited and nothing left; 1: a diff, an edit left to you, a finding or "
    "something not audited; 2: usage error."
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
    'pip install "torch-autoreg[fix]" (from a clone: pip install -e ".[fix]")'
)

FIX_HAND_GRAD: Final = (
    "requires grad: a weight to train wants nn.Parameter, a constant does not, and only you know "
    "which"
)

FIX_HAND_GRAD_EDIT: Final = (
    "self.{attribute} = nn.Parameter(...) if it is a weight to train; if not, create it with "
    "requires_grad=False (or .detach() it)"
)

FIX_HAND_PARAMETER_VIEW: Final = (
    "a view of the parameter {parameter}, kept: .to() converts {parameter} in place and leaves "
    "the view on its old values"
)

FIX_HAND_PARAMETER_VIEW_EDIT: Final = (
    "take the view of self.{parameter} where it is used, instead of keeping it in self.{attribute}"
)

FIX_HAND_ALIAS: Final = (
    "shares its values with {follows} (the same tensor, or its storage), and {written}: "
    "registered or carried on its own, it would be converted apart from {follows} and miss "
    "those writes"
)

FIX_WRITTEN: Final = "they are written in place"

FIX_MAY_BE_WRITTEN: Final = (
    "forward may write them in place (fix could not run it in both train and eval mode to see)"
)

FIX_HAND_ALIAS_EDIT: Final = (
    "read {follows} where self.{attribute} is used, and drop self.{attribute}"
)

FIX_HAND_FROM_PRETRAINED: Final = (
    "built in a transformers PreTrainedModel, whose from_pretrained builds the model on the meta "
    "device and fills each non-persistent buffer with uninitialised memory unless _init_weights "
    "sets it: made a buffer, it would come back as garbage"
)

FIX_HAND_FROM_PRETRAINED_EDIT: Final = (
    "compute it in a reset_buffers() method that __init__ calls, and call "
    "autoreg.reset_buffers(module, recurse=False) from _init_weights (the transformers recipe, "
    "docs/meta-device.md)"
)

FIX_HAND_AUTOGRAD: Final = (
    "an autograd result (it requires grad and is not a leaf), stored while the model is built"
)

FIX_HAND_AUTOGRAD_EDIT: Final = "store it detached (value.detach()), or compute it in forward"

FIX_HAND_PARAMETER: Final = "an nn.Parameter stored around nn.Module.__setattr__"

FIX_HAND_PARAMETER_EDIT: Final = 'self.register_parameter("{attribute}", ...)'

FIX_HAND_NO_SLOT: Final = "cannot be a buffer: '{attribute}' {where}"

FIX_HAND_NO_SLOT_EDIT: Final = (
    "rename the attribute (or remove a class-level value of your own), then run autoreg fix again"
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

FIX_HAND_MOVES_ITSELF: Final = (
    "{cls} overrides {method}() ({where}), which may move it already: autoreg fix cannot tell "
    "what that code does, and registered, it would be moved twice"
)

FIX_HAND_MOVES_ITSELF_EDIT: Final = (
    "register it yourself (register_buffer, or autoreg.Module) and take it out of {method}(), "
    "or leave it to {method}()"
)

FIX_HAND_DICT_READ: Final = (
    "{owner} reads it through the instance's __dict__ ({where}), which holds no buffer: "
    "registered, that read would raise KeyError or find another value"
)

FIX_HAND_DICT_READ_EDIT: Final = (
    "read it as self.{attribute} (nn.Module finds a buffer there), then register it; or leave "
    "it a plain attribute and move it where it is used: .to(x.device)"
)

FIX_HAND_COMPLEX: Final = (
    "a complex tensor: as a buffer, .to(a real dtype) would cast it to that dtype and drop its "
    "imaginary part (a wrong result, with no error), so it stays a plain attribute, as before"
)

FIX_HAND_COMPLEX_EDIT: Final = (
    "move it where forward uses it (self.{attribute}.to(x.device)), unless forward does "
    "already; .to() leaves it where it is"
)

FIX_HAND_DTYPE: Final = (
    "a {dtype} tensor, not of the default dtype ({default}): as a buffer, .half() and "
    ".to(torch.bfloat16) would convert it, where the plain attribute never was, so it stays a "
    "plain attribute, as before"
)

FIX_HAND_DTYPE_EDIT: Final = (
    "move it where forward uses it (self.{attribute}.to(x.device)), unless forward does "
    "already; or make it a buffer yourself if a converted copy is fine"
)

PLAIN_COMMENT_DTYPE: Final = "# {dtype}: .to(a dtype) would convert a buffer of it"
PLAIN_COMMENT: Final = "# complex: .to(a real dtype) would drop its imaginary part"
PLAIN_COMMENT_FROM_PRETRAINED: Final = "# from_pretrained would give a buffer of it no values"
PLAIN_COMMENT_ALIAS: Final = "# an alias: .to() would convert a buffer of it apart from its tensor"
PLAIN_COMMENT_DICT_READ: Final = "# read through __dict__, which holds no buffer"

FIX_HAND_OTHER_VALUE: Final = (
    "stores {what} here, where register_buffer takes only a tensor or None"
)

FIX_HAND_DECLARED: Final = (
    "its annotation {name}: ... would declare a buffer once {cls} used autoreg (nn.Module "
    "reads it as a type hint only), and a store of {name} in {cls} may give it another value "
    "than a tensor or None, which a declared buffer refuses"
)

FIX_HAND_DECLARED_EDIT: Final = (
    "drop the annotation, then subclass autoreg.Module (undeclared, a buffer autoreg "
    "registered takes the other value as a plain attribute); or autoreg fix --style buffer"
)

FIX_HAND_SUBCLASS: Final = (
    "its subclass {subclass} stores it too, in code the run did not see: registered here, "
    "self.{attribute} would be a buffer there, which refuses anything but a tensor or None"
)

FIX_HAND_SUBCLASS_EDIT: Final = (
    'self.register_buffer("{attribute}", ..., persistent=False) where each class stores a '
    "tensor, and another name where a subclass stores something else; or --style base"
)

FIX_HAND_THROUGH: Final = (
    "{where} stores it through another name ({code}), and {what}: registered, it would be a "
    "buffer there, which refuses anything but a tensor or None"
)

FIX_HAND_PASSED: Final = (
    "it stores the parameter {parameter} of {function}() as it is passed, and {where} passes it "
    "{value}: registered, it would be a buffer there, which refuses anything but a tensor or None"
)

FIX_THROUGH_UNKNOWN: Final = "the source does not say that it stores a tensor or None there"
FIX_THROUGH_OTHER: Final = "the source may store {value} there in another configuration"

FIX_HAND_THROUGH_EDIT: Final = (
    "store a tensor or None there (torch.as_tensor(...)), then "
    'self.register_buffer("{attribute}", ..., persistent=False) in the class; or --style base'
)

FIX_HAND_INIT_SUBCLASS: Final = (
    "its __init_subclass__ does not call super().__init_subclass__(): autoreg would not see "
    "its subclasses, which would raise ClassDefinitionError when built"
)

FIX_HAND_INIT_SUBCLASS_EDIT: Final = (
    "call super().__init_subclass__(**kwargs) in {cls}.__init_subclass__, then run fix again"
)

FIX_HAND_MIXIN_SUBCLASS: Final = (
    "its subclass {subclass} puts autoreg's mixin before it in its bases, an order Python "
    "refuses once {cls} is autoreg's (TypeError: no consistent method resolution order)"
)

FIX_HAND_MIXIN_SUBCLASS_EDIT: Final = (
    "subclass autoreg.Module instead of nn.Module in {cls}, and drop autoreg.AutoRegisterMixin "
    "from the bases of {subclass} (it has it through {cls})"
)

FIX_HAND_INIT_SUBCLASS_BELOW: Final = (
    "its subclass {subclass}'s __init_subclass__ does not call super().__init_subclass__(): "
    "once {cls} is autoreg's, autoreg would not see the subclasses of {subclass}, which would "
    "raise ClassDefinitionError when built"
)

FIX_HAND_PLAIN_MIXIN: Final = (
    "stored by {mixin}, which is not a module (a plain mixin, which classes that are no modules "
    "may use too): register_buffer there would raise in those"
)

FIX_HAND_PLAIN_MIXIN_EDIT: Final = (
    "make {cls} an autoreg class (--style base): the store {mixin} makes while {cls} is built "
    "is then registered, and {mixin} stays as it is"
)

FIX_HAND_SETTER: Final = (
    "{setter} runs on self.{attribute} = ..., and register_buffer skips it: the two are not the "
    "same assignment there"
)

FIX_SETTER_DESCRIPTOR: Final = "{owner}.{attribute} is a {what} with a setter"
FIX_SETTER_SETATTR: Final = "{owner}'s own __setattr__"

FIX_HAND_SETTER_EDIT: Final = (
    "keep self.{attribute} = ... where the setter must see it (register by hand what it "
    "stores, under its own name), or --style base, whose stores go through it"
)

FIX_HAND_SUBCLASS_HIDES: Final = (
    "in its subclass {subclass}, '{attribute}' {where}: register_buffer here would raise "
    'KeyError there ("attribute already exists")'
)

FIX_HAND_SUBCLASS_HIDES_EDIT: Final = (
    "keep self.{attribute} a plain attribute, or rename {subclass}.{attribute}; --style base "
    "stores it past the class attribute"
)

# Where a class statement defines the name (project: read from source, as _facts words it).
FIX_CLASS_LEVEL: Final = (
    "is defined on the class (a class-level {what}) and hides any buffer of that name"
)

FIX_HAND_GETATTR: Final = (
    "{cls}'s own __getattr__ may answer for {attribute}, and register_buffer refuses a name "
    'that hasattr() finds ("attribute already exists")'
)

FIX_HAND_GETATTR_EDIT: Final = (
    "keep self.{attribute} a plain attribute and move it where it is used, or let "
    "{cls}.__getattr__ raise AttributeError for it; --style base registers it past __getattr__"
)

FIX_HAND_HELD_BACK: Final = (
    "not rewritten: another store of {attribute} in {cls}, listed, stores what a buffer refuses "
    "(made a buffer here, the name would raise there)"
)

FIX_A_PARAMETER: Final = "an nn.Parameter"

FIX_NOT_A_TENSOR: Final = "a value that is not a tensor"

FIX_HAND_ANOTHER_VALUE: Final = (
    "a tensor in the configuration the factory built, but the source may store {value} here in "
    "another, and a buffer takes only a tensor or None"
)

FIX_OF_PARAMETER: Final = "{value} (the default of {parameter})"

FIX_HAND_ANOTHER_VALUE_EDIT: Final = (
    "keep self.{attribute} a plain attribute, or register it only when it is a tensor: "
    'self.register_buffer("{attribute}", value, persistent=False) if isinstance(value, '
    "torch.Tensor), else self.{attribute} = value"
)

FIX_HAND_NOT_RUN: Final = (
    "not run when the model was built, and the source does not say that it stores a tensor or "
    "None, all register_buffer takes"
)

FIX_HAND_NOT_RUN_EDIT: Final = (
    'self.register_buffer("{attribute}", value, persistent=False) if it stores a tensor or None; '
    "if not, keep that value under another name"
)

FIX_HAND_NOT_RUN_LATER: Final = (
    "not run when the model was built and called once, and the source does not say that it "
    "stores a tensor or None, all a buffer takes"
)

FIX_HAND_NOT_RUN_LATER_EDIT: Final = (
    "store a tensor or None here (a buffer takes nothing else), or keep that value under "
    "another name"
)

FIX_HAND_DELETED: Final = (
    "deleted here: once it is a buffer, a later self.{attribute} = ... outside construction "
    "stores a plain attribute again"
)

FIX_HAND_DELETED_EDIT: Final = (
    "self.{attribute} = None instead of del (the name stays a buffer), or register it again "
    "where it is stored"
)

FIX_HAND_UNSEEN: Final = (
    "never seen being stored while the model was built (written around "
    "nn.Module.__setattr__, or before autoreg fix ran)"
)

FIX_HAND_UNSEEN_EDIT: Final = (
    'self.register_buffer("{attribute}", value, persistent=False) where it is stored'
)

FIX_HAND_HELPER: Final = "stored by {function}(), outside the class"

FIX_HAND_GENERATED: Final = (
    "stored by code without a source file (the __init__ a dataclass generates for {cls}'s "
    "fields), before nn.Module.__init__ has run, when no buffer can be registered"
)

FIX_HAND_GENERATED_EDIT: Final = (
    "after super().__init__() in {cls}.__post_init__: "
    'self.register_buffer("{attribute}", self.__dict__.pop("{attribute}"), persistent=False); '
    "or subclass autoreg.Module, which registers it then"
)

FIX_HAND_HELPER_EDIT: Final = (
    'register it where it is stored: module.register_buffer("{attribute}", value, '
    "persistent=False) in {function}(), or self.register_buffer(...) in {cls}.__init__"
)

FIX_HAND_HELPER_EARLY_EDIT: Final = (
    "{function}() stores it before nn.Module.__init__ has run, when no buffer can be registered: "
    'call it after super().__init__() and register it there (module.register_buffer("{attribute}", '
    "value, persistent=False)), or register it in {cls}.__init__ after that call instead"
)

FIX_HAND_NO_SOURCE: Final = (
    "held by {cls}, whose class statement autoreg fix cannot find (a file it cannot read, or a "
    "class made by type())"
)

FIX_HAND_NO_SOURCE_EDIT: Final = (
    "subclass autoreg.Module where {cls} is defined, or call autoreg.register_tensors(model) "
    "once the model is built"
)

FIX_HAND_NOT_EDITABLE: Final = (
    "stored by {cls}, defined outside {root} (autoreg fix edits only files under the current "
    "directory, never installed packages)"
)

FIX_HAND_LINKED: Final = (
    "stored by {cls}, defined in {path} (through a symbolic link), outside {root}: autoreg fix "
    "edits only files under the current directory"
)

FIX_HAND_LIBRARY: Final = (
    "stored by {cls}, defined in {library}, where packages are installed: autoreg fix never "
    "edits them"
)

FIX_HAND_STORED_BY_PACKAGE: Final = (
    "{holds} that {function}() ({where}), code of an installed package called from here, "
    "stores: autoreg fix never edits a package, and what it keeps is its own"
)

FIX_HAND_STORED_BY_PACKAGE_EDIT: Final = (
    "ask the package not to keep it (an option of the call here may leave the value out), or "
    "keep it yourself where .to() moves it"
)

FIX_HAND_NOT_EDITABLE_EDIT: Final = (
    "call autoreg.register_tensors(model) once the model is built, or run autoreg fix from the "
    "directory that holds the class"
)

FIX_HAND_SETATTR: Final = "stored through setattr(), under a computed name"

FIX_HAND_SPELLED_DTYPE: Final = (
    "its source spells {spelling}, so it may store a tensor of that dtype in a configuration "
    "the run did not build: as a buffer, .half() or .to(dtype) would convert it there"
)

FIX_HAND_SPELLED_DTYPE_EDIT: Final = (
    'self.register_buffer("{attribute}", value, persistent=False) where it stores a tensor of '
    "the default dtype; keep a float64 or complex one a plain attribute, under another name"
)

FIX_HAND_ALIASED: Final = (
    "the source makes {other} the same tensor (self.{other} = self.{attribute}), or a view of "
    "it: as buffers, .to() would convert the two apart"
)

FIX_HAND_ALIASED_EDIT: Final = (
    "keep {attribute} and {other} plain attributes, or store one and read the other from it "
    "(a property)"
)

FIX_HAND_SPELLED_DTYPE_BASE_EDIT: Final = (
    "move it where forward uses it (self.{attribute}.to(x.device)), or keep a float64 one under "
    "another name so that autoreg registers the default-dtype one; until then it is declared "
    "autoreg.Plain, a plain attribute as before, which .to() leaves behind"
)

PLAIN_COMMENT_SPELLED: Final = "# {spelling} in its source: .to(a dtype) would convert it"

FIX_HAND_ALIASED_BASE_EDIT: Final = (
    "store one and read the other from it (a property); until then both are declared "
    "autoreg.Plain, plain attributes as before, which .to() leaves behind"
)

FIX_HAND_COMPUTED: Final = (
    "setattr({self}, name, value) under a name the source does not spell may store it, and what "
    "it stores there the source does not say (a buffer refuses anything but a tensor or None)"
)

FIX_HAND_COMPUTED_EDIT: Final = (
    "keep {attribute} out of the names that setattr() stores, or store only a tensor or None "
    "under it there; then run autoreg fix again"
)

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
    "first stored at run time, and {cls} asks whether it exists (hasattr(), getattr(), or "
    "except AttributeError, contextlib.suppress(AttributeError); or hasattr() of a name it "
    "computes, which fix cannot read): registered in __init__, it would always exist"
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

FIX_HAND_AUTOREG_NAME: Final = (
    "held by {cls}, in a file that binds the name autoreg to something of its own (a function, "
    "a class, a value), there or in a function around the class statement: import autoreg "
    "there would not be the library"
)

FIX_HAND_AUTOREG_NAME_EDIT: Final = (
    "rename the file's autoreg, or import the library under another name and put its "
    "AutoRegisterMixin first in the bases of {cls}"
)

FIX_HAND_BASES: Final = (
    "held by {cls}, whose class statement does not list the bases it has at run time"
)

FIX_HAND_BASES_EDIT: Final = (
    "subclass autoreg.Module instead of nn.Module, or put autoreg.AutoRegisterMixin first in the "
    "bases of {cls}"
)

FIX_HAND_IN_OBJECT: Final = (
    "a tensor inside a {holder} object ({paths}): neither .to() nor autoreg moves tensors "
    "inside other objects"
)

FIX_HAND_IN_OBJECTS: Final = (
    "tensors inside a {holder} object ({paths}): neither .to() nor autoreg moves tensors "
    "inside other objects"
)

FIX_HAND_ARRAY: Final = "a numpy array ({paths}): neither .to() nor autoreg moves numpy arrays"

FIX_HAND_ARRAYS: Final = "numpy arrays ({paths}): neither .to() nor autoreg moves numpy arrays"

FIX_HAND_STORED: Final = "stored by forward, where .to() leaves it"

FIX_HAND_CLASS_ATTRIBUTE: Final = (
    "defined on the class {owner}: neither .to() nor autoreg moves what a class holds"
)

FIX_FORWARD_STRAYS: Final = (
    "note: the forward of {target} makes or takes {count} {tensors} that would stay behind when "
    "the model moves; autoreg fix does not rewrite forward code: autoreg audit {target} --forward "
    "lists each with its fix."
)

FIX_NOT_AUDITED_FORWARD: Final = (
    "autoreg fix: not audited: what the forward of {target} makes ({reason})"
)

FIX_NOT_AUDITED: Final = (
    "autoreg fix: not audited: the forward of {target}, what it makes and what it stores ({reason})"
)

FIX_FORWARD_RAISED: Final = (
    "autoreg fix: not audited: the state the forward of {target} stores (one call on the CPU "
    "raised {error})"
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

FIX_PUT_BACK: Final = (
    "autoreg fix: put back as it was: {files}. The model could not be built from the rewritten "
    "source (above), though it was before; the diff without --write shows the rewrite"
)
