"""Every message autoreg shows, in one package: errors, warnings, fixes and the command line's text.

Each message is a module-level template, asserted whole by the tests. Every message about an
assignment names ``Class.attribute``, describes the offending value (``describe``) and shows the
fix; tables describe a tensor briefly (``brief``: ``float32[2, 3] cpu``). One module per audience:

- ``describe``: how values, dtypes and errors are written, for every other module;
- ``contract``: class definitions, strict and warn mode, conversions, export, buffer containers;
- ``audits``: the fixes ``find_unregistered`` and ``audit_forward`` suggest, and why a pass stops;
- ``cli``: the command line's usage errors and reports;
- ``fix``: ``autoreg fix``.
"""
