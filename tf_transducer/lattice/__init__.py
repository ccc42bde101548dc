# SPDX-License-Identifier: Apache-2.0
"""Recognition lattices (a TensorFlow port of Google's LAST).

`semirings`, `contexts`, `alignments` and `weight_fns` mirror LAST's
modules; `RecognitionLattice` is a Keras layer whose call is the sequence
loss, with `forward`, `backward`, `string_forward`, `shortest_path` and
`build_cache` public.
"""

from tf_transducer.lattice import alignments
from tf_transducer.lattice import contexts
from tf_transducer.lattice import semirings
from tf_transducer.lattice import weight_fns
from tf_transducer.lattice.lattices import RecognitionLattice

__all__ = ["RecognitionLattice", "alignments", "contexts", "semirings", "weight_fns"]
