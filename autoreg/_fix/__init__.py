"""``autoreg fix``: the audit writes the migration, with LibCST.

Design note
-----------
The command builds the model a target names, audits it, and rewrites the source of each class
with findings. It runs in four steps, one module each, plan before execute:

- ``analyse`` builds the target, audits it and calls its forward once on the CPU; ``sites``:
  while the model is built and called, a temporary ``nn.Module.__setattr__`` records where each
  attribute of each module was stored (file, line, function, whether during construction, what
  kind of value). The audit knows which class and attribute leave a tensor behind; this knows the
  line that put it there, exactly, whatever calls whatever.
- ``collect``: from the findings (``find_unregistered``, ``audit_forward``) and those records to
  ``Stray`` records (``strays``): plain data, one per class and attribute, with the source
  location of the class and of each of its bases. It is the only step that looks at tensors and
  classes.
- ``plan``: pure. From the strays and the style (``base`` or ``buffer``) to the edits of each
  file (``edits``), and the hand edits it lists instead of guessing (a weight that may want
  ``nn.Parameter``, a tensor stored through ``setattr`` or by a helper outside the class, a class
  outside the working directory, ...).
- ``codemod``: LibCST. Applies one file's edits to its source and keeps every other byte;
  ``changes`` refuses an edit whose code is not the simple statement it expects (a loop, a nested
  function, a ``hasattr`` check that a registered name would change), and says why.
- ``stores``: the whole source, not one execution. The factory ran one configuration; in the
  buffer style every store of a migrated name in its classes (every branch, every method that
  runs while the module is built) is rewritten, and each store that ran or that the source
  shows storing a tensor or None is kept; any other (a float in the other branch, a
  ``nn.Parameter``, a value the source does not tell, a ``del``) is listed. The base style is
  whole-source by nature: autoreg decides each store as it runs.

- ``project``: in the buffer style, the source under the working directory that the run did not
  load: a subclass there that stores a migrated name (a float default) holds its stores back.

``cli`` runs them, prints a unified diff (or writes it) and re-audits in a fresh process.
LibCST is imported by the ``fix`` command only: ``import autoreg`` needs only torch.

Footguns this avoids: rewriting site-packages or torch (only files under the working directory
are edited); a second run that changes the code again (each edit checks that it is still needed);
a ``register_buffer`` before ``super().__init__()`` or inside a loop; turning a forward's cache
into a buffer whose ``hasattr`` check would now always succeed; a checkpoint that changes (every
buffer it writes is non-persistent).
"""
