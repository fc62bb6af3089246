"""pinwise: place the threads of parallel programs on the cores of multicore machines.

See the machine (:mod:`pinwise.topology`), pin programs (:mod:`pinwise.pinning`), and more to come.
"""

from .errors import PinwiseError
from .topology import Topology, load_topology

__version__ = "0.1.0"
__all__ = ["PinwiseError", "Topology", "load_topology", "__version__"]
