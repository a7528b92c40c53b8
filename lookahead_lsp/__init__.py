"""lookahead-lsp: multi-line inline completions through a lossless lookahead decoder.

The installed namespace. Its subpackages live at the top of the repository (decoder/, context/, lsp_server/,
evaluation/) and pyproject's ``package-dir`` maps ``lookahead_lsp.<name>`` onto them; when the repository root itself is
on sys.path (PYTHONPATH=$PWD in a checkout) this package's path extends to that root, so the checkout's own
folders are the ones imported. A forced instruction-set level (``$LOOKAHEAD_LSP_NATIVE_ISA``) pins PyTorch's
CPU libraries here, before anything imports torch (decoder/isa.py).
"""

from __future__ import annotations

import os

_here = os.path.dirname(os.path.abspath(__file__))
if not os.path.isdir(os.path.join(_here, "decoder")):  # a checkout, not an installed wheel
    __path__.append(os.path.dirname(_here))

from lookahead_lsp.decoder.kernels.isa import pin_libraries  # noqa: E402  (after the path is set)

pin_libraries()
